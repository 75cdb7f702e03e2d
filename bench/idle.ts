/**
 * Idle cost: Redis commands per minute for one idle queue. EchoMQ: one Worker (defaults) plus sweep()
 * every 10 s from the same process. BullMQ: one Worker (defaults: drainDelay 5 s, stalledInterval 30 s;
 * its stalled checker runs inside the worker). Each side runs alone for a window of WINDOW seconds, after a
 * 1 s warm-up, and the counts are scaled to one minute. Top-level commands (what clients send) are
 * counted with SLOWLOG at threshold 0 (script-inner entries, client "?:0", and the meter's own are left
 * out), blocking commands (BZPOPMIN) from INFO commandstats; the total including commands run inside scripts comes from INFO commandstats.
 */
import { Worker as BullWorker } from 'bullmq'
import type { Redis } from 'ioredis'
import { sweep, Worker } from '../lib/index.js'
import { BULL_PREFIX, bullConnection, EMQ_PREFIX } from './build.js'
import { commandStats, resetStats, slowlogThreshold, subtract, topLevelSlowlog, withoutMeter } from './meter.js'
import { type Ctx, sleep } from './util.js'

const SWEEP_EVERY_MS = 10_000
const BLOCKING = /^(bzpopmin|bzpopmax|bzmpop|blpop|brpop|blmpop|blmove|brpoplpush)$/

export interface IdleSide {
  windowS: number
  /** Top-level commands per minute (scaled from the window). */
  perMinute: number
  /** Including commands run inside scripts. */
  perMinuteWithScriptInner: number
  /** Top-level commands seen in the window, by name. */
  commands: Record<string, number>
}

export interface IdleResult {
  windowS: number
  emq: IdleSide
  bull: IdleSide
}

async function window(meter: Redis, seconds: number, during?: () => () => void): Promise<IdleSide> {
  await slowlogThreshold(meter, 0)
  await resetStats(meter)
  const before = await commandStats(meter)
  const stop = during?.()
  await sleep(seconds * 1000)
  stop?.()
  const stats = withoutMeter(subtract(await commandStats(meter), before))
  const entries = await topLevelSlowlog(meter)
  await slowlogThreshold(meter, -1)
  // A blocking command that times out is counted in commandstats but never logged by SLOWLOG (Redis 7.0):
  // blocking commands are counted from commandstats (scripts do not run them), the rest from SLOWLOG.
  const commands: Record<string, number> = {}
  for (const e of entries) if (!BLOCKING.test(e.cmd)) commands[e.cmd] = (commands[e.cmd] ?? 0) + 1
  for (const [cmd, s] of Object.entries(stats)) if (BLOCKING.test(cmd)) commands[cmd] = s.calls
  const topLevel = Object.values(commands).reduce((a, b) => a + b, 0)
  const scale = 60 / seconds
  return {
    windowS: seconds,
    perMinute: Math.round(topLevel * scale * 10) / 10,
    perMinuteWithScriptInner: Math.round(Object.values(stats).reduce((n, s) => n + s.calls, 0) * scale * 10) / 10,
    commands,
  }
}

async function emqSide(ctx: Ctx, seconds: number): Promise<IdleSide> {
  const client = ctx.redis.connect('emq-idle')
  const sweeper = ctx.redis.connect('emq-idle-sweeper')
  const queue = 'idle'
  const worker = new Worker(queue, async () => null, { connection: client, prefix: EMQ_PREFIX })
  worker.on('error', (err) => ctx.log(`EchoMQ idle worker error: ${String(err)}`))
  try {
    await sleep(1000)
    return await window(ctx.redis.meter, seconds, () => {
      const run = () =>
        void sweep(sweeper, queue, { prefix: EMQ_PREFIX, graceMs: 0 }).catch((err: unknown) =>
          ctx.log(`EchoMQ idle sweep error: ${String(err)}`),
        )
      run()
      const timer = setInterval(run, SWEEP_EVERY_MS)
      return () => clearInterval(timer)
    })
  } finally {
    await worker.close()
    client.disconnect()
    sweeper.disconnect()
  }
}

async function bullSide(ctx: Ctx, seconds: number): Promise<IdleSide> {
  const worker = new BullWorker('idle', async () => null, {
    connection: bullConnection(ctx.redis.host, ctx.redis.port),
    prefix: BULL_PREFIX,
  })
  worker.on('error', (err) => ctx.log(`BullMQ idle worker error: ${String(err)}`))
  try {
    await worker.waitUntilReady()
    await sleep(1000)
    return await window(ctx.redis.meter, seconds)
  } finally {
    await worker.close()
  }
}

export async function runIdle(ctx: Ctx): Promise<IdleResult> {
  const seconds = ctx.quick ? 6 : 30
  await ctx.redis.meter.flushall()
  const emq = await emqSide(ctx, seconds)
  await ctx.redis.meter.flushall()
  const bull = await bullSide(ctx, seconds)
  await ctx.redis.meter.flushall()
  ctx.log(`idle (${seconds} s window, scaled to 1 min): EchoMQ ${emq.perMinute}/min, BullMQ ${bull.perMinute}/min`)
  return { windowS: seconds, emq, bull }
}
