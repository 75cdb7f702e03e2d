/**
 * Heartbeat: Redis server time to keep L leases alive, per lease and second, each side with its REAL
 * LockManager running on its own timer, at the same lease (LEASE_MS, 2 s) and each side's default
 * renewal schedule: EchoMQ renews every half lease (workerSettings' default heartbeatInterval, 1 s) and
 * refreshes the lease index of about half the leases per tick; BullMQ's timer fires every
 * lockRenewTime / 2 (lockRenewTime defaults to half the lock: 500 ms) and renews the locks it last
 * renewed more than lockRenewTime / 2 ago, so its actual rate is measured, not assumed.
 *
 * Each run: the manager starts; its first tick is not measured; then SLOWLOG RESET, and the window runs
 * from the end of that tick to the end of the first tick at least WINDOW ms later (whole renewal periods):
 * at least WINDOW_TICKS of EchoMQ's ticks, as a tick's server time varies with how cold Redis's caches
 * are after a second idle (a window of 3 ticks let one slow tick move a run's figure by half). Server
 * time: EVALSHA usec, the growth of INFO commandstats over the window (no CONFIG RESETSTAT: it frees
 * Redis's per-command latency histograms, and the first call after it would pay for allocating one for
 * each command it runs, which charges the side running more kinds of command); per call: SLOWLOG at a
 * SLOW_US threshold (script-inner entries left out), cross-checked against the call count. Renewals and
 * index refreshes are counted on the client. Between runs the leases are parked with a long lease (not
 * measured), so both sides' leases live in the same Redis while the other side is measured. ROUNDS
 * alternating runs per side (EchoMQ, BullMQ, ...).
 */
import { randomUUID } from 'node:crypto'
import { LockManager as BullLockManager, Worker as BullWorker } from 'bullmq'
import type { Redis } from 'ioredis'
import { systemClock, workerSettings } from '../lib/options.js'
import { extend, preloadScripts, type Renewal } from '../lib/redis/commands.js'
import { queueKeys } from '../lib/redis/keys.js'
import { LockManager } from '../lib/worker/lock-manager.js'
import { BULL_PREFIX, bullActive, bullConnection, closeBull, EMQ_PREFIX, emqAdd, emqTake } from './build.js'
import { fmt, fs, type Target, table, x, xs } from './format.js'
import { commandStats, SCRIPT_CMDS, slowlogThreshold, subtract, sum, topLevelSlowlog, withoutMeter } from './meter.js'
import { alternate, type Ctx, median, ROUNDS, ratios, type Spread, spreadOf } from './util.js'

const LEASE_MS = 2_000
/** Between runs: long enough to outlast the other side's run. */
const PARKED_MS = 600_000
/** SLOWLOG threshold while measuring (µs): every renewal call is slower, few script-inner commands are. */
const SLOW_US = 10
const BATCH = 500
/** A window spans at least this many EchoMQ ticks (heartbeatInterval apart). */
const WINDOW_TICKS = 8

/** One measured window of one side. */
export interface HeartbeatRun {
  seconds: number
  /** Server time of the renewal calls (µs). */
  usec: number
  calls: number
  renewals: number
  /** EchoMQ: renewals that also refreshed the lease index. */
  indexed: number
  usPerLeaseSecond: number
  renewalsPerLeaseSecond: number
  /** Server time of each call (µs), from SLOWLOG. */
  perCallUs: number[]
  callMedianUs: number
  callMaxUs: number
}

export interface HeartbeatSide {
  runs: HeartbeatRun[]
  usPerLeaseSecond: Spread
  renewalsPerLeaseSecond: Spread
  callsPerSecond: Spread
  callMedianUs: Spread
  callMaxUs: Spread
}

export interface HeartbeatRow {
  leases: number
  emq: HeartbeatSide
  bull: HeartbeatSide
  ratioPerLeaseSecond: Spread
}

export interface HeartbeatResults {
  leaseMs: number
  windowMs: number
  emqIntervalMs: number
  bullLockRenewTimeMs: number
  rows: HeartbeatRow[]
}

/** Counts renewal calls in flight; a tick is over when none is (a tick's calls are all sent at once). */
class Ticks {
  calls = 0
  renewals = 0
  indexed = 0
  private inFlight = 0
  private waiters: ((at: number) => void)[] = []

  wrap<A extends unknown[], R>(fn: (...args: A) => Promise<R>, size: (...args: A) => { renewals: number; indexed: number }) {
    return async (...args: A): Promise<R> => {
      const s = size(...args)
      this.calls++
      this.renewals += s.renewals
      this.indexed += s.indexed
      this.inFlight++
      try {
        return await fn(...args)
      } finally {
        if (--this.inFlight === 0) {
          const at = performance.now()
          for (const wake of this.waiters.splice(0)) wake(at)
        }
      }
    }
  }

  /** Resolves with the time the next tick ends. */
  ended(timeoutMs = 15_000): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`heartbeat: no renewal ended within ${timeoutMs} ms`)), timeoutMs)
      this.waiters.push((at) => {
        clearTimeout(timer)
        resolve(at)
      })
    })
  }

  reset(): void {
    this.calls = 0
    this.renewals = 0
    this.indexed = 0
  }
}

async function measure(meter: Redis, ticks: Ticks, leases: number, windowMs: number, manager: { start(): void; stop(): Promise<void> }) {
  manager.start()
  try {
    const t0 = await ticks.ended()
    await slowlogThreshold(meter, SLOW_US)
    await meter.slowlog('RESET')
    const before = await commandStats(meter)
    ticks.reset()
    let t1 = t0
    while (t1 - t0 < windowMs) t1 = await ticks.ended()
    const stats = sum(withoutMeter(subtract(await commandStats(meter), before)), SCRIPT_CMDS)
    const slow = (await topLevelSlowlog(meter)).filter((e) => SCRIPT_CMDS.includes(e.cmd))
    if (stats.calls !== ticks.calls) throw new Error(`heartbeat: ${ticks.calls} calls sent, ${stats.calls} scripts run on the server`)
    if (slow.length !== stats.calls)
      throw new Error(`heartbeat: SLOWLOG saw ${slow.length} of ${stats.calls} calls (threshold ${SLOW_US} µs)`)
    const seconds = (t1 - t0) / 1000
    const perCallUs = slow.map((e) => e.usec)
    return {
      seconds,
      usec: stats.usec,
      calls: stats.calls,
      renewals: ticks.renewals,
      indexed: ticks.indexed,
      usPerLeaseSecond: stats.usec / leases / seconds,
      renewalsPerLeaseSecond: ticks.renewals / leases / seconds,
      perCallUs,
      callMedianUs: median(perCallUs),
      callMaxUs: Math.max(...perCallUs),
    }
  } finally {
    await slowlogThreshold(meter, -1)
    await manager.stop()
  }
}

/** EchoMQ: L leases held by one worker token; each run a fresh LockManager, as a Worker builds it. */
async function emqSide(ctx: Ctx, leases: number, windowMs: number) {
  const client = ctx.redis.connect(`emq-heartbeat-${leases}`)
  const k = queueKeys(EMQ_PREFIX, `hb-${leases}`)
  await emqAdd(client, `hb-${leases}`, 0, leases)
  const held = await emqTake(client, `hb-${leases}`, leases, PARKED_MS, randomUUID())
  await preloadScripts(client)
  const { heartbeatInterval } = workerSettings({ lockDuration: LEASE_MS })
  const ticks = new Ticks()
  const renew = ticks.wrap(
    (batch: Renewal[]) => extend(client, k, LEASE_MS, batch),
    (batch) => ({ renewals: batch.length, indexed: batch.filter((r) => r.index).length }),
  )
  const park = async () => {
    for (let i = 0; i < held.length; i += BATCH) {
      const lost = (
        await extend(
          client,
          k,
          PARKED_MS,
          held.slice(i, i + BATCH).map((h) => ({ ...h, index: true })),
        )
      ).filter((s) => s !== 'renewed')
      if (lost.length) throw new Error(`EchoMQ heartbeat: ${lost.length} leases not renewed while parking`)
    }
  }
  const run = async (): Promise<HeartbeatRun> => {
    const problems: string[] = []
    const manager = new LockManager({
      extend: renew,
      intervalMs: heartbeatInterval,
      leaseMs: LEASE_MS,
      clock: systemClock,
      onLost: (id, reason) => problems.push(`${id} lost: ${reason}`),
      onError: (err) => problems.push(String(err)),
    })
    const since = systemClock.now()
    for (const lease of held) manager.add(lease, since)
    const result = await measure(ctx.redis.meter, ticks, leases, windowMs, { start: () => manager.start(), stop: () => manager.close() })
    if (problems.length || manager.size !== leases)
      throw new Error(`EchoMQ heartbeat: ${problems.slice(0, 3).join('; ')} (${manager.size} of ${leases} held)`)
    await park()
    return result
  }
  return { run, intervalMs: heartbeatInterval, close: () => client.disconnect() }
}

/** BullMQ: L jobs moved to active; each run a fresh LockManager of a Worker with a 2 s lock (its defaults otherwise). */
async function bullSide(ctx: Ctx, leases: number, windowMs: number) {
  const name = `hb-${leases}`
  const workerId = randomUUID()
  const state = await bullActive(ctx.redis.host, ctx.redis.port, name, leases, (i) => `${workerId}:${i}`)
  const ids = state.held.map((h) => h.id)
  const tokens = state.held.map((h) => h.token)
  const park = async () => {
    const failed = await state.worker.backend.extendLocks(ids, tokens, PARKED_MS)
    if (failed.length) throw new Error(`BullMQ heartbeat: ${failed.length} locks not renewed while parking`)
  }
  await park()
  const renewer = new BullWorker(name, null, {
    connection: bullConnection(ctx.redis.host, ctx.redis.port),
    prefix: BULL_PREFIX,
    autorun: false,
    lockDuration: LEASE_MS,
  })
  const problems: string[] = []
  renewer.on('lockRenewalFailed', (failed: string[]) => problems.push(`renewal failed for ${failed.length} jobs`))
  renewer.on('error', (err: Error) => problems.push(err.message))
  await renewer.waitUntilReady()
  const ticks = new Ticks()
  const target = renewer as unknown as { extendJobLocks: (ids: string[], tokens: string[], ms: number) => Promise<string[]> }
  target.extendJobLocks = ticks.wrap(target.extendJobLocks.bind(renewer), (jobIds) => ({ renewals: jobIds.length, indexed: 0 }))
  const lockRenewTime = renewer.opts.lockRenewTime ?? LEASE_MS / 2
  const run = async (): Promise<HeartbeatRun> => {
    const manager = new BullLockManager(renewer as unknown as ConstructorParameters<typeof BullLockManager>[0], {
      lockRenewTime,
      lockDuration: renewer.opts.lockDuration ?? LEASE_MS,
      workerId: renewer.id,
      ...(renewer.opts.name === undefined ? {} : { workerName: renewer.opts.name }),
    })
    const now = Date.now()
    for (const { id, token } of state.held) manager.trackJob(id, token, now)
    const result = await measure(ctx.redis.meter, ticks, leases, windowMs, { start: () => manager.start(), stop: () => manager.close() })
    if (problems.length) throw new Error(`BullMQ heartbeat: ${problems.slice(0, 3).join('; ')}`)
    await park()
    return result
  }
  const close = async () => {
    await renewer.close()
    await closeBull(state)
  }
  return { run, lockRenewTime, close }
}

const summary = (runs: HeartbeatRun[]): HeartbeatSide => ({
  runs,
  usPerLeaseSecond: spreadOf(runs, (r) => r.usPerLeaseSecond),
  renewalsPerLeaseSecond: spreadOf(runs, (r) => r.renewalsPerLeaseSecond),
  callsPerSecond: spreadOf(runs, (r) => r.calls / r.seconds),
  callMedianUs: spreadOf(runs, (r) => r.callMedianUs),
  callMaxUs: spreadOf(runs, (r) => r.callMaxUs),
})

export async function runHeartbeat(ctx: Ctx): Promise<HeartbeatResults> {
  const sizes = ctx.quick ? [1_000] : [100, 1_000, 5_000]
  const windowMs = ctx.quick ? 1_000 : Math.max(3_000, WINDOW_TICKS * workerSettings({ lockDuration: LEASE_MS }).heartbeatInterval)
  const rows: HeartbeatRow[] = []
  let emqIntervalMs = 0
  let bullLockRenewTimeMs = 0
  for (const leases of sizes) {
    await ctx.redis.meter.flushall()
    const emq = await emqSide(ctx, leases, windowMs)
    const bull = await bullSide(ctx, leases, windowMs)
    emqIntervalMs = emq.intervalMs
    bullLockRenewTimeMs = bull.lockRenewTime
    try {
      const runs = await alternate(ROUNDS, { emq: emq.run, bull: bull.run })
      const row = {
        leases,
        emq: summary(runs.emq),
        bull: summary(runs.bull),
        ratioPerLeaseSecond: ratios(runs.emq, runs.bull, (r) => r.usPerLeaseSecond),
      }
      ctx.log(
        `heartbeat L=${leases}: EchoMQ ${fs(row.emq.usPerLeaseSecond, 3)} µs/lease-s at ${fmt(row.emq.renewalsPerLeaseSecond.median, 2)} renewals/lease-s, ` +
          `BullMQ ${fs(row.bull.usPerLeaseSecond, 3)} at ${fmt(row.bull.renewalsPerLeaseSecond.median, 2)}; ratio ${xs(row.ratioPerLeaseSecond)}`,
      )
      rows.push(row)
    } finally {
      emq.close()
      await bull.close()
    }
  }
  await ctx.redis.meter.flushall()
  return { leaseMs: LEASE_MS, windowMs, emqIntervalMs, bullLockRenewTimeMs, rows }
}

export function heartbeatReport(r: HeartbeatResults): string {
  return (
    `Heartbeat: Redis server time to keep leases alive at a ${fmt(r.leaseMs)} ms lease, each side's real LockManager on its own timer ` +
    `(EchoMQ every ${fmt(r.emqIntervalMs)} ms; BullMQ timer every ${fmt(r.bullLockRenewTimeMs / 2)} ms renewing locks older than ${fmt(r.bullLockRenewTimeMs / 2)} ms),\n` +
    `windows of whole renewal periods >= ${fmt(r.windowMs)} ms after one unmeasured tick; median (min-max) of ${ROUNDS} alternating runs; ` +
    'server µs from INFO commandstats, per call from SLOWLOG\n' +
    table(
      [
        'leases',
        'EMQ µs/lease-s',
        'EMQ renew/lease-s',
        'EMQ index/lease-s',
        'EMQ call µs med',
        'EMQ call µs max',
        'EMQ calls/s',
        'Bull µs/lease-s',
        'Bull renew/lease-s',
        'Bull call µs med',
        'Bull call µs max',
        'ratio µs/lease-s',
      ],
      r.rows.map((h) => [
        fmt(h.leases),
        fs(h.emq.usPerLeaseSecond, 2),
        fmt(h.emq.renewalsPerLeaseSecond.median, 2),
        fmt(median(h.emq.runs.map((run) => run.indexed / h.leases / run.seconds)), 2),
        fs(h.emq.callMedianUs),
        fs(h.emq.callMaxUs),
        fmt(h.emq.callsPerSecond.median, 1),
        fs(h.bull.usPerLeaseSecond, 2),
        fmt(h.bull.renewalsPerLeaseSecond.median, 2),
        fs(h.bull.callMedianUs),
        fs(h.bull.callMaxUs),
        xs(h.ratioPerLeaseSecond),
      ]),
    ) +
    `\n   EchoMQ sends at most ${BATCH} leases per call (all of a tick's calls at once); BullMQ one call per tick with every lock due.`
  )
}

export function heartbeatTargets(r: HeartbeatResults): Target[] {
  return r.rows.flatMap((h) => [
    {
      name: `heartbeat L=${h.leases}: server time per lease-second <= 0.5x BullMQ`,
      pass: h.ratioPerLeaseSecond.median <= 0.5,
      figures:
        `${fmt(h.emq.usPerLeaseSecond.median, 3)} vs ${fmt(h.bull.usPerLeaseSecond.median, 3)} µs/lease-s = ${xs(h.ratioPerLeaseSecond)}; ` +
        `renewals/lease-s ${fmt(h.emq.renewalsPerLeaseSecond.median, 2)} vs ${fmt(h.bull.renewalsPerLeaseSecond.median, 2)}`,
    },
    {
      name: `heartbeat L=${h.leases}: server time per renewal call <= BullMQ's (median and max)`,
      pass: h.emq.callMedianUs.median <= h.bull.callMedianUs.median && h.emq.callMaxUs.median <= h.bull.callMaxUs.median,
      figures:
        `median call ${fmt(h.emq.callMedianUs.median)} vs ${fmt(h.bull.callMedianUs.median)} µs = ${x(h.emq.callMedianUs.median / h.bull.callMedianUs.median)}, ` +
        `max call ${fmt(h.emq.callMaxUs.median)} vs ${fmt(h.bull.callMaxUs.median)} µs = ${x(h.emq.callMaxUs.median / h.bull.callMaxUs.median)} ` +
        `(EchoMQ ${Math.min(h.leases, BATCH)} leases per call, BullMQ ${fmt(h.leases)})`,
    },
  ])
}
