/**
 * Sizes of the chaos runs. `npm test` runs the short sizes; `npm run chaos` sets CHAOS_FULL=1 for the full
 * ones. Each size can be overridden on its own (CHAOS_JOBS, CHAOS_WORKERS, CHAOS_SECONDS, CHAOS_RESTARTS).
 */
export const FULL = process.env.CHAOS_FULL === '1' || process.env.CHAOS_FULL === 'true'

function size(name: string, short: number, full: number): number {
  const raw = process.env[name]
  if (raw !== undefined && raw.trim() !== '') {
    const n = Number(raw)
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${name}: expected a positive number, got ${JSON.stringify(raw)}`)
    return n
  }
  return FULL ? full : short
}

export const sizes = {
  /** Jobs in the crash run. */
  jobs: size('CHAOS_JOBS', 300, 5_000),
  /** Worker processes in the crash run. */
  workers: size('CHAOS_WORKERS', 3, 6),
  /** Seconds over which the crash run's jobs are added (the chaos lasts at least this long). */
  seconds: size('CHAOS_SECONDS', 3, 15),
  /** Jobs added during the Redis-restart run. */
  restartJobs: size('CHAOS_RESTART_JOBS', 300, 3_000),
  /** Redis restarts during that run. */
  restarts: size('CHAOS_RESTARTS', 3, 6),
}

/** A seeded PRNG (mulberry32) so a failing run can be replayed with CHAOS_SEED. */
export function rng(seed = Number(process.env.CHAOS_SEED ?? Date.now() % 2 ** 31)): {
  seed: number
  next(): number
  int(min: number, max: number): number
  pick<T>(items: T[]): T
} {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    seed,
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: (items) => items[Math.floor(next() * items.length)] as never,
  }
}

/** Load shaping for the chaos schedule (never used to wait for a condition: that is waitFor's job). */
export const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
