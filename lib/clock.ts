/**
 * Clock: the time and timers a Worker, its LockManager and its Promoter use. The system clock is
 * monotonic (`performance.now()`), so a wall-clock step (NTP) never moves a lease deadline or the close
 * deadline; tests inject a manual one and need no real waiting.
 *
 * Its timers take any duration: Node fires a timer longer than 2^31 - 1 ms (24.8 days) after 1 ms, so a
 * longer one (a job delayed a month) is armed in steps of at most that, each re-armed for what is left.
 */
export interface Clock {
  now(): number
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

/** The longest delay Node's setTimeout honours. */
export const MAX_TIMER_MS = 2 ** 31 - 1

/** A timer longer than MAX_TIMER_MS: the step armed now. */
class LongTimer {
  step: NodeJS.Timeout | undefined
}

/** setTimeout for any duration; clear the handle with `clearLongTimeout`. */
export function longTimeout(fn: () => void, ms: number): NodeJS.Timeout | LongTimer {
  if (!(ms > MAX_TIMER_MS)) return setTimeout(fn, ms)
  const timer = new LongTimer()
  const end = performance.now() + ms
  const arm = (left: number) => {
    timer.step = setTimeout(
      () => {
        const rest = end - performance.now()
        if (rest > 0) arm(rest)
        else fn()
      },
      Math.min(left, MAX_TIMER_MS),
    )
  }
  arm(ms)
  return timer
}

export function clearLongTimeout(handle: unknown): void {
  clearTimeout((handle instanceof LongTimer ? handle.step : handle) as NodeJS.Timeout | undefined)
}

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: longTimeout,
  clearTimeout: clearLongTimeout,
}

/** Waits for `work` at most `ms` by `clock`; true when it settled (either way) in time. */
export async function settlesWithin(clock: Clock, work: Promise<unknown>, ms: number): Promise<boolean> {
  // No bound (close() with no closeTimeout): no timer either.
  if (ms === Number.POSITIVE_INFINITY)
    return work.then(
      () => true,
      () => true,
    )
  let timer: unknown
  const late = new Promise<false>((resolve) => (timer = clock.setTimeout(() => resolve(false), Math.max(0, ms))))
  const settled = work.then(
    () => true as const,
    () => true as const,
  )
  try {
    return await Promise.race([settled, late])
  } finally {
    clock.clearTimeout(timer)
  }
}
