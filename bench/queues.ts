/**
 * Many queues: the reaper over Q idle queues, as the Lambda runs it: createReaper with metrics off, its
 * own connection, the queues registered in `emq:queues` (lib/registry.ts registerQueue) and holding
 * nothing. Handler time is the wall clock of `reaper.run()`: the first run (a cold start: connection,
 * eviction-policy check, discovery's scan) and then WARM_RUNS more; commands sent by the reaper's
 * connection are counted on the client (bench/count.ts). Then, at BIG queues, one invocation of
 * SWEEPS_PER_INVOCATION sweeps SWEEP_INTERVAL_MS apart, run for real except that the sleeps between
 * sweeps are injected and do not wait: the projected invocation time is the wall clock plus the time
 * slept, and `remainingMs` counts down a 55 s Lambda timeout by that same projected clock, so the reaper's
 * own planning (which stops early when another sweep would not fit) decides whether all sweeps ran.
 */
import type { Redis } from 'ioredis'
import { reaperConfig } from '../lib/reaper/config.js'
import { createReaper } from '../lib/reaper/reaper.js'
import { registerQueue } from '../lib/registry.js'
import { EMQ_PREFIX } from './build.js'
import { SentCommands, UNLABELLED } from './count.js'
import { commandList, fmt, fs, type Target, table } from './format.js'
import { type Ctx, type Spread, spread } from './util.js'

const WARM_RUNS = 3
const TIMEOUT_MS = 55_000
const SWEEPS = 5
const SWEEP_INTERVAL_MS = 10_000
const TARGET_RUN_MS = 1_000
/** Registered at once. */
const REGISTER_IN_FLIGHT = 1_000

export interface QueuesResults {
  queues: number
  coldMs: number
  coldSent: Record<string, number>
  warmMs: Spread
  /** Commands one warm run sent, by name. */
  warmSent: Record<string, number>
  /** Commands per queue of a warm run, leaving out the registry read and the connection's ping. */
  perQueue: number
  big: { queues: number; passMs: Spread; sweeps: number; wallMs: number; sleptMs: number; projectedMs: number; timeoutMs: number }
}

async function register(client: Redis, from: number, to: number): Promise<void> {
  for (let i = from; i < to; i += REGISTER_IN_FLIGHT) {
    const names = Array.from({ length: Math.min(REGISTER_IN_FLIGHT, to - i) }, (_, j) => `idle-${i + j}`)
    await Promise.all(names.map((q) => registerQueue(client, EMQ_PREFIX, q)))
  }
}

const noLog = () => undefined

export async function runQueues(ctx: Ctx): Promise<QueuesResults> {
  const queues = ctx.quick ? 1_000 : 10_000
  const bigQueues = ctx.quick ? 2_000 : 20_000
  const { redis } = ctx
  const redisUrl = `redis://${redis.host}:${redis.port}`
  await redis.meter.flushall()
  const counter = new SentCommands().install()
  counter.label(redis.meter, 'meter')
  try {
    await register(redis.meter, 0, queues)
    const reaper = createReaper(reaperConfig({ redisUrl, metricsMode: 'off' }, {}), { log: noLog })
    const timed = async () => {
      counter.reset()
      const t0 = performance.now()
      const summary = await reaper.run()
      const ms = performance.now() - t0
      if (Object.keys(summary.queues).length !== queues) throw new Error(`queues: swept ${Object.keys(summary.queues).length} of ${queues}`)
      return { ms, sent: counter.sent(UNLABELLED) }
    }
    const cold = await timed()
    const warm: { ms: number; sent: Record<string, number> }[] = []
    for (let i = 0; i < WARM_RUNS; i++) warm.push(await timed())
    await reaper.close()
    const warmSent = warm[warm.length - 1]?.sent ?? {}
    const perRun = Object.values(warmSent).reduce((a, b) => a + b, 0) - (warmSent.smembers ?? 0) - (warmSent.ping ?? 0)
    ctx.log(`queues: reaper over ${queues} idle queues, cold ${fmt(cold.ms)} ms, warm ${warm.map((w) => fmt(w.ms)).join(', ')} ms`)

    await register(redis.meter, queues, bigQueues)
    const passes: number[] = []
    let slept = 0
    let mark = 0
    const big = createReaper(reaperConfig({ redisUrl, metricsMode: 'off', sweeps: SWEEPS, intervalMs: SWEEP_INTERVAL_MS }, {}), {
      log: noLog,
      // Between sweeps: note the pass that just ended, and do not wait.
      sleep: async (ms) => {
        const now = performance.now()
        passes.push(now - mark)
        mark = now
        slept += ms
      },
    })
    await big.run({ queues: [] }) // opens the connection and checks the eviction policy; sweeps nothing
    const t0 = performance.now()
    mark = t0
    passes.length = 0
    slept = 0
    const summary = await big.run({ remainingMs: () => TIMEOUT_MS - (performance.now() - t0) - slept })
    const wallMs = performance.now() - t0
    passes.push(performance.now() - mark)
    await big.close()
    const passMs = spread(passes)
    const result: QueuesResults = {
      queues,
      coldMs: cold.ms,
      coldSent: cold.sent,
      warmMs: spread(warm.map((w) => w.ms)),
      warmSent,
      perQueue: perRun / queues,
      big: {
        queues: bigQueues,
        passMs,
        sweeps: summary.sweeps,
        wallMs,
        sleptMs: slept,
        projectedMs: wallMs + slept,
        timeoutMs: TIMEOUT_MS,
      },
    }
    ctx.log(`queues: ${bigQueues} queues, ${summary.sweeps} sweeps in ${fmt(wallMs)} ms + ${fmt(slept)} ms slept`)
    return result
  } finally {
    counter.uninstall()
    await redis.meter.flushall()
  }
}

export function queuesReport(r: QueuesResults): string {
  const b = r.big
  return (
    `Many queues: the reaper (createReaper, metrics off) over ${fmt(r.queues)} idle registered queues; handler time = wall clock of reaper.run()\n` +
    table(
      ['run', 'handler ms', 'commands sent'],
      [
        ['first (cold start)', fmt(r.coldMs), commandList(r.coldSent)],
        [`warm, ${WARM_RUNS} runs`, fs(r.warmMs), commandList(r.warmSent)],
      ],
    ) +
    `\n   commands per idle queue (warm, leaving out the registry read and the ping): ${fmt(r.perQueue, 3)}` +
    `\n   ${fmt(b.queues)} queues, ${SWEEPS} sweeps ${fmt(SWEEP_INTERVAL_MS)} ms apart in one invocation (sleeps injected, not waited): ` +
    `${b.sweeps} sweeps ran; pass ${fs(b.passMs)} ms; wall ${fmt(b.wallMs)} ms + slept ${fmt(b.sleptMs)} ms = ${fmt(b.projectedMs)} ms ` +
    `of a ${fmt(b.timeoutMs)} ms timeout (${fmt(b.timeoutMs - b.projectedMs)} ms to spare)`
  )
}

export function queuesTargets(r: QueuesResults): Target[] {
  const b = r.big
  return [
    {
      name: `queues: one reaper run over ${fmt(r.queues)} idle queues <= ${fmt(TARGET_RUN_MS)} ms`,
      pass: r.warmMs.median <= TARGET_RUN_MS,
      figures: `warm ${fs(r.warmMs)} ms over ${WARM_RUNS} runs; first run (cold start) ${fmt(r.coldMs)} ms`,
    },
    {
      name: `queues: <= 1 command sent per idle queue (plus the registry read)`,
      pass: r.perQueue <= 1,
      figures: `${fmt(r.perQueue, 3)} per queue; a warm run sent ${commandList(r.warmSent)}`,
    },
    {
      name: `queues: ${fmt(b.queues)} queues, ${SWEEPS} sweeps ${fmt(SWEEP_INTERVAL_MS)} ms apart fit a ${fmt(b.timeoutMs / 1000)} s timeout`,
      pass: b.sweeps === SWEEPS && b.projectedMs <= b.timeoutMs,
      figures: `${b.sweeps} of ${SWEEPS} sweeps; pass ${fmt(b.passMs.median)} ms; ${fmt(b.projectedMs)} ms projected, ${fmt(b.timeoutMs - b.projectedMs)} ms to spare`,
    },
  ]
}
