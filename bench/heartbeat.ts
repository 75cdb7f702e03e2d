/**
 * Heartbeat: renewing L leases held by one worker. EchoMQ: lib/lock-manager.ts's LockManager.tick() with
 * the extend function a Worker gives it (the extend script, at most 500 leases per call, every batch sent
 * at once). BullMQ: its own LockManager.extendLocks (one extendLocks script call with every job id).
 * Each side ticks once unmeasured (loads the script on the connection), then TICKS measured ticks;
 * medians are reported. Server time: EVALSHA usec from INFO commandstats after CONFIG RESETSTAT. Round
 * trips: counted on the client around the renew call (a round trip starts when a call is made while none
 * is in flight).
 */
import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { extend, preloadScripts, type Renewal } from '../lib/commands.js'
import { queueKeys } from '../lib/keys.js'
import { LockManager } from '../lib/lock-manager.js'
import { LOCK_DURATION_MS_DEFAULT, systemClock } from '../lib/options.js'
import { bullActive, closeBull, EMQ_PREFIX, emqAdd, emqTake } from './build.js'
import { commandStats, resetStats, SCRIPT_CMDS, subtract, sum, withoutMeter } from './meter.js'
import { type Ctx, countRoundTrips, median } from './util.js'

const TICKS = 5

export interface TickResult {
  usec: number
  calls: number
  roundTrips: number
}

export interface HeartbeatSide {
  /** Medians over the measured ticks. */
  usec: number
  usecPerLease: number
  calls: number
  roundTrips: number
  ticks: TickResult[]
}

export interface HeartbeatRow {
  leases: number
  emq: HeartbeatSide
  bull: HeartbeatSide
}

async function measureTicks(
  meter: Redis,
  counter: { calls: number; roundTrips: number },
  tick: () => Promise<void>,
  leases: number,
): Promise<HeartbeatSide> {
  await tick() // unmeasured: the first call on a connection may be an EVAL
  const ticks: TickResult[] = []
  for (let i = 0; i < TICKS; i++) {
    await resetStats(meter)
    const before = await commandStats(meter)
    Object.assign(counter, { calls: 0, roundTrips: 0 })
    await tick()
    const s = sum(withoutMeter(subtract(await commandStats(meter), before)), SCRIPT_CMDS)
    if (s.calls !== counter.calls) throw new Error(`heartbeat: ${counter.calls} calls sent, ${s.calls} scripts run on the server`)
    ticks.push({ usec: s.usec, calls: counter.calls, roundTrips: counter.roundTrips })
  }
  const usec = median(ticks.map((t) => t.usec))
  return {
    usec,
    usecPerLease: usec / leases,
    calls: median(ticks.map((t) => t.calls)),
    roundTrips: median(ticks.map((t) => t.roundTrips)),
    ticks,
  }
}

async function emqSide(ctx: Ctx, leases: number): Promise<HeartbeatSide> {
  const client = ctx.redis.connect(`emq-heartbeat-${leases}`)
  const queue = `hb-${leases}`
  const k = queueKeys(EMQ_PREFIX, queue)
  try {
    await emqAdd(client, queue, 0, leases)
    const held = await emqTake(client, queue, leases, LOCK_DURATION_MS_DEFAULT, randomUUID())
    await preloadScripts(client)
    // The same function a Worker gives its LockManager (lib/commands.ts).
    const renew = (batch: Renewal[]) => extend(client, k, LOCK_DURATION_MS_DEFAULT, batch)
    const { counter, wrapped } = countRoundTrips(renew)
    const problems: string[] = []
    const manager = new LockManager({
      extend: wrapped,
      intervalMs: LOCK_DURATION_MS_DEFAULT / 2,
      leaseMs: LOCK_DURATION_MS_DEFAULT,
      clock: systemClock,
      onLost: (id, reason) => problems.push(`${id} lost: ${reason}`),
      onError: (err) => problems.push(String(err)),
    })
    const now = Date.now()
    for (const lease of held) manager.add(lease, now)
    const result = await measureTicks(ctx.redis.meter, counter, () => manager.tick(), leases)
    await manager.close()
    if (problems.length || manager.size !== leases)
      throw new Error(`EchoMQ heartbeat: ${problems.slice(0, 3).join('; ')} (${manager.size} of ${leases} held)`)
    return result
  } finally {
    client.disconnect()
  }
}

interface BullLockManager {
  trackJob(id: string, token: string, ts: number): void
  extendLocks(ids: string[]): Promise<void>
}

async function bullSide(ctx: Ctx, leases: number): Promise<HeartbeatSide> {
  const workerId = randomUUID()
  const state = await bullActive(ctx.redis.host, ctx.redis.port, `hb-${leases}`, leases, (i) => `${workerId}:${i}`)
  try {
    const worker = state.worker as unknown as {
      lockManager: BullLockManager
      extendJobLocks: (ids: string[], tokens: string[], d: number) => Promise<string[]>
    }
    const { counter, wrapped } = countRoundTrips(worker.extendJobLocks.bind(worker))
    worker.extendJobLocks = wrapped
    const problems: string[] = []
    state.worker.on('lockRenewalFailed', (ids: string[]) => problems.push(`renewal failed for ${ids.length} jobs`))
    state.worker.on('error', (err: Error) => problems.push(err.message))
    const now = Date.now()
    for (const { id, token } of state.held) worker.lockManager.trackJob(id, token, now)
    const ids = state.held.map((h) => h.id)
    const result = await measureTicks(ctx.redis.meter, counter, () => worker.lockManager.extendLocks(ids), leases)
    if (problems.length) throw new Error(`BullMQ heartbeat: ${problems.slice(0, 3).join('; ')}`)
    return result
  } finally {
    await closeBull(state)
  }
}

export async function runHeartbeat(ctx: Ctx): Promise<HeartbeatRow[]> {
  const sizes = ctx.quick ? [100, 1_000] : [100, 1_000, 5_000]
  const rows: HeartbeatRow[] = []
  for (const leases of sizes) {
    await ctx.redis.meter.flushall()
    const emq = await emqSide(ctx, leases)
    await ctx.redis.meter.flushall()
    const bull = await bullSide(ctx, leases)
    await ctx.redis.meter.flushall()
    ctx.log(
      `heartbeat L=${leases}: EchoMQ ${emq.usecPerLease.toFixed(2)} µs/lease in ${emq.calls} calls / ${emq.roundTrips} RT, ` +
        `BullMQ ${bull.usecPerLease.toFixed(2)} µs/lease in ${bull.calls} calls / ${bull.roundTrips} RT`,
    )
    rows.push({ leases, emq, bull })
  }
  return rows
}
