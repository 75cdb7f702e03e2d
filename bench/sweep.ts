/**
 * Sweep cost: N jobs in flight, k of them stalled. EchoMQ: the k jobs were taken with a 1 ms lease (a dead
 * worker), the rest with a long one; one sweep() marks, the next recovers (graceMs 0). BullMQ: all N moved
 * to active with a lock, the locks of k of them (spread evenly over the active list) deleted; one
 * moveStalledJobsToWait call marks (SADD of every active id), the next recovers. Between BullMQ's two
 * calls the healthy jobs' locks are renewed with extendLocks (which also takes them out of the stalled
 * set), as its workers do within a stalledInterval; that renewal is not measured, and it makes BullMQ's
 * second call cheaper than without it. Its `stalled-check` guard key is deleted before each call.
 *
 * Server time per pass = usec of the top-level commands (EVALSHA, and ZRANGE for EchoMQ) from INFO
 * commandstats after CONFIG RESETSTAT; each call is timed alone (commandstats read after every call),
 * which gives the longest single call. SLOWLOG (threshold 1 ms) cross-checks the longest call. Targets at
 * the largest N and k: both passes together within TARGET_TOTAL_US, no call over TARGET_CALL_US.
 */
import type { Redis } from 'ioredis'
import { sweep } from '../lib/index.js'
import { preloadScripts } from '../lib/redis/commands.js'
import { queueKeys } from '../lib/redis/keys.js'
import { bullActive, bullKey, closeBull, EMQ_PREFIX, emqAdd, emqTake } from './build.js'
import { SentCommands } from './count.js'
import { fmt, type Target, table, x } from './format.js'
import {
  type CmdStats,
  commandStats,
  resetStats,
  SCRIPT_CMDS,
  slowlogThreshold,
  subtract,
  sum,
  timeEachCall,
  topLevelSlowlog,
  withoutMeter,
} from './meter.js'
import { type Ctx, median, ratio, sleep } from './util.js'

const HEALTHY_LEASE_MS = 3_600_000
const FLAT_ROUNDS = 21
/**
 * EchoMQ sweeps each scenario this many times (fresh stalled jobs each round, the same jobs in flight);
 * the first sweep after the scripts are loaded runs cold, as a reaper's sweep a minute does not.
 */
const EMQ_ROUNDS = 3
/** At the largest N and k: server time of both passes, and of any one call (µs). */
const TARGET_TOTAL_US = 10_000
const TARGET_CALL_US = 2_000

export interface PassResult {
  /** Server time of the pass: sum of its top-level commands (µs). */
  usec: number
  calls: number
  /** Longest single top-level call (µs), from commandstats read after each call. */
  maxCallUs: number
  /** Server time of each top-level call, in order (µs). */
  perCallUs: number[]
  /** Longest top-level call at or over 1 ms seen by SLOWLOG (0 when none). */
  slowlogMaxUs: number
  /** What the pass did: marked / recovered (EchoMQ) or recovered (BullMQ) job count. */
  marked?: number
  recovered: number
  commandstats: CmdStats
}

export interface SweepRow {
  n: number
  k: number
  /** EchoMQ: the round with the median total of EMQ_ROUNDS; `totals` holds every round's. */
  emq: {
    mark: PassResult
    recover: PassResult
    usec: number
    maxCallUs: number
    slowlogMaxUs: number
    buildMs: number
    totals: number[]
  }
  bull: { mark: PassResult; recover: PassResult; usec: number; maxCallUs: number; buildMs: number }
}

const EMQ_TOP = ['zrange', ...SCRIPT_CMDS]
const SWEEP_LABEL = 'emq-sweep'

async function measurePass(
  meter: Redis,
  run: () => Promise<{ marked?: number; recovered: number; perCall?: number[] }>,
  top: string[],
): Promise<PassResult> {
  await slowlogThreshold(meter, 1000)
  await resetStats(meter)
  const before = await commandStats(meter)
  const did = await run()
  const stats = withoutMeter(subtract(await commandStats(meter), before))
  const slow = await topLevelSlowlog(meter)
  await slowlogThreshold(meter, -1)
  const total = sum(stats, top)
  const perCall = did.perCall ?? [total.usec]
  return {
    usec: total.usec,
    calls: total.calls,
    maxCallUs: Math.max(0, ...perCall),
    perCallUs: perCall,
    slowlogMaxUs: Math.max(0, ...slow.map((e) => e.usec)),
    ...(did.marked === undefined ? {} : { marked: did.marked }),
    recovered: did.recovered,
    commandstats: stats,
  }
}

async function waitExpired(client: Redis, lockKeys: string[]): Promise<void> {
  for (;;) {
    let alive = 0
    for (let i = 0; i < lockKeys.length; i += 500) alive += await client.exists(...lockKeys.slice(i, i + 500))
    if (alive === 0) return
    await sleep(5)
  }
}

async function emqScenario(ctx: Ctx, n: number, k: number): Promise<SweepRow['emq']> {
  const { redis } = ctx
  const client = redis.connect(`emq-sweep-${n}-${k}`)
  const queue = `sweep-${n}-${k}`
  const keys = queueKeys(EMQ_PREFIX, queue)
  try {
    const t0 = Date.now()
    await emqAdd(client, queue, 0, n)
    const dead = await emqTake(client, queue, k, 1, 'dead-worker')
    await emqTake(client, queue, n - k, HEALTHY_LEASE_MS, 'live-worker')
    await waitExpired(
      client,
      dead.map((h) => keys.lock(h.id)),
    )
    const buildMs = Date.now() - t0
    await preloadScripts(client)
    const timer = timeEachCall(client, redis.meter, ['zrange', 'evalsha'], EMQ_TOP)
    // Only EMQ_TOP's commands are timed: any other command the sweep sends would be server time uncounted.
    const counter = new SentCommands().install()
    counter.label(client, SWEEP_LABEL)
    const pass = (expect: 'marked' | 'recovered') =>
      measurePass(
        redis.meter,
        async () => {
          await timer.start()
          counter.reset()
          const r = await sweep(client, queue, { prefix: EMQ_PREFIX, graceMs: 0 })
          const untimed = Object.keys(counter.sent(SWEEP_LABEL)).filter((name) => !EMQ_TOP.includes(name))
          if (untimed.length > 0) throw new Error(`EchoMQ sweep sent commands the bench does not time: ${untimed.join(', ')}`)
          if (r[expect].length !== k || r.failed.length !== 0)
            throw new Error(
              `EchoMQ sweep ${n}/${k}: expected ${k} ${expect}, got ${JSON.stringify({ m: r.marked.length, r: r.recovered.length, f: r.failed.length })}`,
            )
          return { marked: r.marked.length, recovered: r.recovered.length, perCall: timer.calls.map((c) => c.usec) }
        },
        EMQ_TOP,
      )
    try {
      const rounds: { mark: PassResult; recover: PassResult; usec: number }[] = []
      let crashed = dead.map((h) => h.id)
      for (let round = 0; round < EMQ_ROUNDS; round++) {
        if (round > 0 && k > 0) {
          // The next round's k stalled jobs: fresh ones, taken by a dead worker; the last round's leave.
          await client.del(keys.wait)
          for (let i = 0; i < crashed.length; i += 500) await client.del(...crashed.slice(i, i + 500).map((id) => keys.job(id)))
          await emqAdd(client, queue, n + (round - 1) * k, n + round * k)
          crashed = (await emqTake(client, queue, k, 1, 'dead-worker')).map((h) => h.id)
          await waitExpired(
            client,
            crashed.map((id) => keys.lock(id)),
          )
        }
        const mark = await pass('marked')
        const recover = await pass('recovered')
        rounds.push({ mark, recover, usec: mark.usec + recover.usec })
      }
      // The round with the median total stands for the scenario; the spread and the longest call are over all.
      const sorted = [...rounds].sort((a, b) => a.usec - b.usec)
      const mid = sorted[Math.floor(sorted.length / 2)] as (typeof rounds)[number]
      const maxCallUs = Math.max(...rounds.flatMap((r) => [r.mark.maxCallUs, r.recover.maxCallUs]))
      const slowlogMaxUs = Math.max(...rounds.flatMap((r) => [r.mark.slowlogMaxUs, r.recover.slowlogMaxUs]))
      return { ...mid, maxCallUs, slowlogMaxUs, buildMs, totals: rounds.map((r) => r.usec) }
    } finally {
      timer.restore()
      counter.uninstall()
    }
  } finally {
    client.disconnect()
  }
}

async function bullScenario(ctx: Ctx, n: number, k: number): Promise<SweepRow['bull']> {
  const { redis } = ctx
  const name = `sweep-${n}-${k}`
  const TOKEN = 'bench-live-token'
  const t0 = Date.now()
  const state = await bullActive(redis.host, redis.port, name, n, () => TOKEN)
  try {
    const active = await redis.meter.lrange(bullKey(name, 'active'), 0, -1)
    if (active.length !== n) throw new Error(`BullMQ sweep ${n}/${k}: ${active.length} active, expected ${n}`)
    const stalled = new Set(Array.from({ length: k }, (_, i) => active[Math.floor((i * n) / k)] as string))
    const stalledList = [...stalled]
    for (let i = 0; i < stalledList.length; i += 500)
      await redis.meter.del(...stalledList.slice(i, i + 500).map((id) => bullKey(name, `${id}:lock`)))
    const buildMs = Date.now() - t0
    const backend = state.worker.backend
    // ioredis sends a script as EVAL the first time on each connection: make that first call a no-op (the
    // stalled-check guard makes the script return at once) so the measured calls are EVALSHA.
    await redis.meter.set(bullKey(name, 'stalled-check'), '1', 'PX', 60_000)
    if ((await backend.moveStalledJobsToWait()).length !== 0) throw new Error('BullMQ warm-up call did work')
    const pass = async (expectRecovered: number) => {
      await redis.meter.del(bullKey(name, 'stalled-check'))
      return measurePass(
        redis.meter,
        async () => {
          const recovered = await backend.moveStalledJobsToWait()
          if (recovered.length !== expectRecovered)
            throw new Error(`BullMQ sweep ${n}/${k}: expected ${expectRecovered} recovered, got ${recovered.length}`)
          return { recovered: recovered.length }
        },
        SCRIPT_CMDS,
      )
    }
    const mark = await pass(0)
    // Healthy workers renew their locks before the next check (not measured).
    const healthy = active.filter((id) => !stalled.has(id))
    for (let i = 0; i < healthy.length; i += 5000) {
      const ids = healthy.slice(i, i + 5000)
      const failed = await backend.extendLocks(
        ids,
        ids.map(() => TOKEN),
        30_000,
      )
      if (failed.length) throw new Error(`BullMQ sweep ${n}/${k}: ${failed.length} lock renewals failed`)
    }
    const recover = await pass(k)
    return { mark, recover, usec: mark.usec + recover.usec, maxCallUs: Math.max(mark.maxCallUs, recover.maxCallUs), buildMs }
  } finally {
    await closeBull(state)
  }
}

export interface FlatRow {
  n: number
  /** Server time of one EchoMQ sweep with nothing stalled (µs): median and minimum over the rounds. */
  medianUs: number
  minUs: number
  rounds: number
}

/**
 * Does a sweep with nothing stalled cost more with more jobs in flight? One EchoMQ queue per N, all in
 * the same Redis, swept in turn for FLAT_ROUNDS rounds, so noise from the machine hits every N alike.
 */
async function flatCheck(ctx: Ctx, sizes: number[]): Promise<FlatRow[]> {
  const client = ctx.redis.connect('emq-sweep-flat')
  try {
    await ctx.redis.meter.flushall()
    for (const n of sizes) {
      await emqAdd(client, `flat-${n}`, 0, n)
      await emqTake(client, `flat-${n}`, n, HEALTHY_LEASE_MS, 'live-worker')
    }
    await preloadScripts(client)
    const samples = new Map<number, number[]>(sizes.map((n) => [n, []]))
    for (let round = 0; round < FLAT_ROUNDS; round++) {
      for (const n of sizes) {
        await resetStats(ctx.redis.meter)
        const before = await commandStats(ctx.redis.meter)
        const r = await sweep(client, `flat-${n}`, { prefix: EMQ_PREFIX, graceMs: 0 })
        if (r.marked.length + r.recovered.length + r.failed.length !== 0) throw new Error(`flat sweep N=${n} found stalled jobs`)
        samples.get(n)?.push(sum(withoutMeter(subtract(await commandStats(ctx.redis.meter), before)), EMQ_TOP).usec)
      }
    }
    await ctx.redis.meter.flushall()
    return sizes.map((n) => {
      const v = samples.get(n) ?? []
      return { n, medianUs: median(v), minUs: Math.min(...v), rounds: v.length }
    })
  } finally {
    client.disconnect()
  }
}

export interface SweepResults {
  rows: SweepRow[]
  flat: FlatRow[]
}

export async function runSweep(ctx: Ctx): Promise<SweepResults> {
  // BENCH_SWEEP_LARGEST=1: only the largest scenario, on a server nothing else ran on (see docs/benchmarks.md).
  const largestOnly = process.env.BENCH_SWEEP_LARGEST === '1' && !ctx.quick
  const sizes = largestOnly ? [100_000] : ctx.quick ? [500, 5_000] : [1_000, 10_000, 100_000]
  const stalls = largestOnly ? [1_000] : ctx.quick ? [0, 10, 100] : [0, 10, 1_000]
  const rows: SweepRow[] = []
  for (const n of sizes) {
    for (const k of stalls) {
      if (k > n) continue
      await ctx.redis.meter.flushall()
      const emq = await emqScenario(ctx, n, k)
      await ctx.redis.meter.flushall()
      const bull = await bullScenario(ctx, n, k)
      await ctx.redis.meter.flushall()
      ctx.log(
        `sweep N=${n} k=${k}: EchoMQ ${emq.usec} µs (max call ${emq.maxCallUs}, build ${emq.buildMs} ms), BullMQ ${bull.usec} µs (max call ${bull.maxCallUs}, build ${bull.buildMs} ms)`,
      )
      rows.push({ n, k, emq, bull })
    }
  }
  const flat = await flatCheck(ctx, sizes)
  ctx.log(`sweep with nothing stalled, EchoMQ, median of ${FLAT_ROUNDS}: ${flat.map((f) => `N=${f.n} ${f.medianUs} µs`).join(', ')}`)
  return { rows, flat }
}

export function sweepReport(r: SweepResults): string {
  const parts = [
    'Sweep: server time per pass, µs (INFO commandstats: top-level EVALSHA/ZRANGE); pass 1 marks, pass 2 recovers; ' +
      `EchoMQ the median of ${EMQ_ROUNDS} rounds (total's min-max; longest call of all rounds), BullMQ one run\n` +
      table(
        [
          'N',
          'k',
          'EMQ mark',
          'EMQ recover',
          'EMQ total',
          'EMQ max call',
          'EMQ calls',
          'Bull mark',
          'Bull recover',
          'Bull total',
          'Bull max call',
          'ratio total',
          'ratio max call',
        ],
        r.rows.map((s) => [
          fmt(s.n),
          fmt(s.k),
          fmt(s.emq.mark.usec),
          fmt(s.emq.recover.usec),
          `${fmt(s.emq.usec)} (${fmt(Math.min(...s.emq.totals))}-${fmt(Math.max(...s.emq.totals))})`,
          fmt(s.emq.maxCallUs),
          `${s.emq.mark.calls}+${s.emq.recover.calls}`,
          fmt(s.bull.mark.usec),
          fmt(s.bull.recover.usec),
          fmt(s.bull.usec),
          fmt(s.bull.maxCallUs),
          x(ratio(s.emq.usec, s.bull.usec)),
          x(ratio(s.emq.maxCallUs, s.bull.maxCallUs)),
        ]),
      ) +
      '\n   BullMQ: healthy locks renewed between its two calls (unmeasured), as its workers do within a stalledInterval.',
  ]
  if (r.flat.length) {
    parts.push(
      `   EchoMQ sweep with nothing stalled (one queue per N, swept in turn ${r.flat[0]?.rounds} times): ` +
        r.flat.map((f) => `N=${fmt(f.n)} median ${fmt(f.medianUs)} µs (min ${fmt(f.minUs)})`).join(', '),
    )
  }
  return parts.join('\n')
}

export function sweepTargets(r: SweepResults): Target[] {
  const out: Target[] = []
  const rows = r.rows
  if (!rows.length) return out
  const maxN = Math.max(...rows.map((s) => s.n))
  const minN = Math.min(...rows.map((s) => s.n))
  const maxK = Math.max(...rows.map((s) => s.k))
  const big = rows.find((s) => s.n === maxN && s.k === maxK)
  if (big) {
    const rr = ratio(big.emq.usec, big.bull.usec)
    out.push({
      name: `sweep N=${maxN} k=${maxK}: server time <= 1/20 of BullMQ (EchoMQ median of ${EMQ_ROUNDS} rounds, BullMQ one run)`,
      pass: rr <= 0.05,
      figures: `${fmt(big.emq.usec)} vs ${fmt(big.bull.usec)} µs = ${x(rr)} (limit 0.05x)`,
    })
    out.push({
      name: `sweep N=${maxN} k=${maxK}: server time over both passes (mark + recover) <= ${fmt(TARGET_TOTAL_US / 1000)} ms`,
      pass: big.emq.usec <= TARGET_TOTAL_US,
      figures:
        `median of ${EMQ_ROUNDS} rounds ${fmt(big.emq.usec)} µs (${big.emq.totals.map((t) => fmt(t)).join(', ')}) = ` +
        `mark ${fmt(big.emq.mark.usec)} (${big.emq.mark.calls} calls) + recover ${fmt(big.emq.recover.usec)} ` +
        `(${big.emq.recover.calls} calls); BullMQ ${fmt(big.bull.usec)} µs`,
    })
    const slowest = big.emq.slowlogMaxUs
    out.push({
      name: `sweep N=${maxN} k=${maxK}: no single call > ${fmt(TARGET_CALL_US / 1000)} ms`,
      pass: big.emq.maxCallUs <= TARGET_CALL_US && slowest <= TARGET_CALL_US,
      figures:
        `longest EchoMQ call ${fmt(big.emq.maxCallUs)} µs by commandstats, ` +
        `${slowest ? `${fmt(slowest)} µs` : 'none >= 1 ms'} by SLOWLOG (BullMQ ${fmt(big.bull.maxCallUs)} µs)`,
    })
  }
  const flatBig = r.flat.find((f) => f.n === maxN)?.medianUs
  const flatSmall = r.flat.find((f) => f.n === minN)?.medianUs
  if (flatBig !== undefined && flatSmall !== undefined && maxN > minN) {
    const g = ratio(flatBig, flatSmall)
    out.push({
      name: `sweep k=0: cost does not grow with N (N=${maxN} <= 1.5x N=${minN})`,
      pass: g <= 1.5,
      figures: `median sweep ${fmt(flatBig)} µs at N=${maxN} vs ${fmt(flatSmall)} µs at N=${minN} = ${x(g)}`,
    })
  }
  return out
}
