/**
 * Idle cost: commands SENT to Redis a minute for one idle queue (a script call counts once; what scripts
 * run inside Redis is not sent), counted on the clients by bench/count.ts. Both sides run at once, in one
 * window, each on its own clients:
 *   EchoMQ with the reaper: one Worker with skipStalledCheck (the reaper sweeps; docs/attempts-and-stalls.md),
 *   on an ioredis client created here (its blocking duplicate is counted too), and the reaper as the Lambda
 *   runs it (createReaper with metrics off, its own connection) invoked once a minute: at the start of the
 *   window and every 60 s in it. The reaper's first run (a cold start: its eviction-policy check and
 *   discovery) is before the window, reported apart.
 *   EchoMQ without a reaper (a BullMQ program as it is): one Worker with its defaults, which sweeps the queue
 *   itself every stalledInterval (30 s), under a prefix of its own so the reaper does not see its queue.
 *   BullMQ: one Worker with its defaults (drainDelay 5 s, its stalled checker every 30 s).
 * Per minute: EchoMQ = worker commands x 60 / window + reaper commands / reaper runs (one run a minute);
 * a worker alone = its commands x 60 / window. The window is 120 s (two of the EchoMQ worker's 60 s blocks,
 * four stalledIntervals) in a full run; with --quick it is shorter than the block, so its figures say little.
 */
import { Worker as BullWorker } from 'bullmq'
import { Worker } from '../lib/index.js'
import { reaperConfig } from '../lib/reaper/config.js'
import { createReaper } from '../lib/reaper/reaper.js'
import { BULL_PREFIX, EMQ_PREFIX } from './build.js'
import { SentCommands, UNLABELLED } from './count.js'
import { commandList, fmt, type Target, table, x } from './format.js'
import { type Ctx, ratio, sleep } from './util.js'

const REAPER_EVERY_MS = 60_000
const WARM_UP_MS = 2_000
const TARGET_PER_MINUTE = 4
/** The worker without a reaper: a prefix the reaper (EMQ_PREFIX's registry) does not discover. */
const ALONE_PREFIX = `${EMQ_PREFIX}-alone`

export interface IdleResults {
  windowS: number
  reaperRuns: number
  emq: {
    perMinute: number
    worker: Record<string, number>
    reaper: Record<string, number>
    /** The reaper's first run (cold start), before the window. */
    reaperColdStart: Record<string, number>
    workerPerMinute: number
    reaperPerRun: number
  }
  /** One Worker with its defaults and no reaper: it sweeps the queue itself. */
  emqAlone: { perMinute: number; worker: Record<string, number> }
  bull: { perMinute: number; worker: Record<string, number> }
}

const total = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0)

export async function runIdle(ctx: Ctx): Promise<IdleResults> {
  const windowS = ctx.quick ? 6 : 120
  const { redis } = ctx
  await redis.meter.flushall()
  const counter = new SentCommands().install()
  counter.label(redis.meter, 'meter')
  const emqClient = counter.label(redis.connect('emq-idle'), 'emq')
  const aloneClient = counter.label(redis.connect('emq-alone-idle'), 'emq-alone')
  const bullClient = counter.label(redis.connect('bull-idle'), 'bull')
  const log = (level: string, message: string) => {
    if (level !== 'info') ctx.log(`idle reaper ${level}: ${message}`)
  }
  const reaper = createReaper(reaperConfig({ redisUrl: `redis://${redis.host}:${redis.port}`, metricsMode: 'off' }, {}), { log })
  const worker = new Worker('idle', async () => null, { connection: emqClient, prefix: EMQ_PREFIX, skipStalledCheck: true })
  worker.on('error', (err) => ctx.log(`EchoMQ idle worker error: ${String(err)}`))
  const alone = new Worker('idle', async () => null, { connection: aloneClient, prefix: ALONE_PREFIX })
  alone.on('error', (err) => ctx.log(`EchoMQ idle worker (no reaper) error: ${String(err)}`))
  const bull = new BullWorker('idle', async () => null, { connection: bullClient, prefix: BULL_PREFIX })
  bull.on('error', (err) => ctx.log(`BullMQ idle worker error: ${String(err)}`))
  try {
    await bull.waitUntilReady()
    await sleep(WARM_UP_MS)
    counter.reset()
    await reaper.run()
    const reaperColdStart = counter.sent(UNLABELLED)
    counter.reset()
    const started = performance.now()
    const windowMs = windowS * 1000
    let reaperRuns = 0
    for (; reaperRuns * REAPER_EVERY_MS < windowMs; reaperRuns++) {
      await sleep(started + reaperRuns * REAPER_EVERY_MS - performance.now())
      await reaper.run()
    }
    await sleep(started + windowMs - performance.now())
    const emqWorker = counter.sent('emq')
    const emqReaper = counter.sent(UNLABELLED)
    const aloneWorker = counter.sent('emq-alone')
    const bullWorker = counter.sent('bull')
    const workerPerMinute = (total(emqWorker) * 60) / windowS
    const reaperPerRun = total(emqReaper) / Math.max(1, reaperRuns)
    const result: IdleResults = {
      windowS,
      reaperRuns,
      emq: {
        perMinute: workerPerMinute + reaperPerRun,
        worker: emqWorker,
        reaper: emqReaper,
        reaperColdStart,
        workerPerMinute,
        reaperPerRun,
      },
      emqAlone: { perMinute: (total(aloneWorker) * 60) / windowS, worker: aloneWorker },
      bull: { perMinute: (total(bullWorker) * 60) / windowS, worker: bullWorker },
    }
    ctx.log(`idle (${windowS} s window): EchoMQ ${fmt(result.emq.perMinute, 1)}/min, BullMQ ${fmt(result.bull.perMinute, 1)}/min`)
    return result
  } finally {
    counter.uninstall()
    await worker.close()
    await alone.close()
    await bull.close()
    await reaper.close()
    emqClient.disconnect()
    aloneClient.disconnect()
    bullClient.disconnect()
    await redis.meter.flushall()
  }
}

export function idleReport(r: IdleResults): string {
  return (
    `Idle: commands SENT to Redis a minute (a script call counts once), one idle queue, measured over ${r.windowS} s ` +
    `(counted on each client; EchoMQ's reaper invoked every 60 s: ${r.reaperRuns} runs in the window)\n` +
    table(
      ['', 'commands/min', 'sent in the window'],
      [
        ['EchoMQ worker (skipStalledCheck)', fmt(r.emq.workerPerMinute, 1), commandList(r.emq.worker)],
        ['EchoMQ reaper, once a minute', fmt(r.emq.reaperPerRun, 1), commandList(r.emq.reaper)],
        ['EchoMQ total, with the reaper', fmt(r.emq.perMinute, 1), ''],
        ['EchoMQ worker (defaults), no reaper', fmt(r.emqAlone.perMinute, 1), commandList(r.emqAlone.worker)],
        ['BullMQ worker (defaults)', fmt(r.bull.perMinute, 1), commandList(r.bull.worker)],
        ['ratio EchoMQ/BullMQ, with the reaper', x(ratio(r.emq.perMinute, r.bull.perMinute)), ''],
        ['ratio EchoMQ/BullMQ, no reaper', x(ratio(r.emqAlone.perMinute, r.bull.perMinute)), ''],
      ],
    ) +
    `\n   EchoMQ reaper's first run (cold start, before the window): ${commandList(r.emq.reaperColdStart)}.` +
    `\n   Per minute: EchoMQ worker sent x 60 / ${r.windowS} s + reaper sent / ${r.reaperRuns} runs; a worker alone sent x 60 / ${r.windowS} s.` +
    "\n   No reaper: per stalledInterval (30 s) a SET NX PX claim of stalled-check and, by the worker that won it, the sweep's probe" +
    " (one script on an idle queue); per 60 s block a BZPOPMIN and the registry's SADD." +
    (r.windowS < 60 ? "\n   (quick: the window is shorter than the EchoMQ worker's 60 s block, so the worker figures say little.)" : '')
  )
}

export function idleTargets(r: IdleResults): Target[] {
  return [
    {
      name: `idle: one idle EchoMQ worker + the reaper once a minute send <= ${TARGET_PER_MINUTE} commands/min`,
      pass: r.emq.perMinute <= TARGET_PER_MINUTE,
      figures:
        `${fmt(r.emq.perMinute, 1)}/min = worker ${fmt(r.emq.workerPerMinute, 1)} + reaper ${fmt(r.emq.reaperPerRun, 1)} ` +
        `(BullMQ idle worker ${fmt(r.bull.perMinute, 1)}/min; ${r.windowS} s window)`,
    },
    {
      name: 'idle: one idle EchoMQ worker with its defaults and no reaper (it sweeps itself), beside BullMQ (no target)',
      pass: undefined,
      figures:
        `${fmt(r.emqAlone.perMinute, 1)}/min: ${commandList(r.emqAlone.worker)} in ${r.windowS} s ` +
        `(BullMQ ${fmt(r.bull.perMinute, 1)}/min = ${x(ratio(r.emqAlone.perMinute, r.bull.perMinute))})`,
    },
  ]
}
