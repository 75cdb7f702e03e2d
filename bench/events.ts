/**
 * Events with a listener. Throughput: M no-op jobs pre-added, then one worker in this process
 * (concurrency CONCURRENCY, defaults otherwise) runs until all M have completed, four sides alternating
 * ROUNDS times: EchoMQ and BullMQ each without and with a QueueEvents (in this process too, listening for
 * `completed`, ready and given SETTLE_MS before the worker starts). jobs/s from starting the worker to
 * its last 'completed' event, as bench/throughput.ts; Redis CPU per job from INFO cpu. Delivery: the
 * listener's `completed` events received out of M, and how long after the worker's last completion the
 * listener got its last one (a listener that falls further behind than the stream's cap, 10,000 entries on
 * both sides, loses events). The listener's cost = 1 - jobs/s with it / jobs/s without, run by run on
 * each side. EchoMQ writes no stream while nobody listens; BullMQ always writes it.
 *
 * Idle: Redis commands a minute of an idle queue (no worker, no job) with one QueueEvents of each side
 * attached, each side alone in its own window, and with none (nothing but the meter connected): INFO
 * commandstats deltas over the window (the meter's own commands left out). Each window starts SETTLE_MS
 * after the listener is ready; it is a whole number of the listeners' blocking timeouts (10 s, both
 * libraries' default) in a full run, so every blocking XREAD that ends in it is counted once. With --quick
 * the window is shorter than one XREAD block, so its figures say little.
 */
import { Queue as BullQueue, QueueEvents as BullQueueEvents, Worker as BullWorker } from 'bullmq'
import { QueueEvents, Worker } from '../lib/index.js'
import { BULL_PREFIX, bullAddMany, bullConnection, EMQ_PREFIX, emqAddMany } from './build.js'
import { commandList, fmt, fs, type Target, table, x, xs } from './format.js'
import { commandStats, redisCpuUs, resetStats, subtract, withoutMeter } from './meter.js'
import { alternate, type Ctx, completion, ROUNDS, ratio, ratios, type Spread, sleep, spread, spreadOf, watchWorker } from './util.js'

const CONCURRENCY = 50
const SETTLE_MS = 500
/** How long the listener may take to deliver the rest once the worker is done. */
const DELIVERY_TIMEOUT_MS = 30_000

type Side = 'emq' | 'emqListen' | 'bull' | 'bullListen'

export interface EventsRun {
  jobs: number
  ms: number
  jobsPerSec: number
  redisCpuUsPerJob: number
  /** `completed` events the listener received (undefined without a listener). */
  received?: number
  /** From the worker's last completion to the listener's last event (ms). */
  lagMs?: number
}

export interface EventsSide {
  runs: EventsRun[]
  jobsPerSec: Spread
  redisCpuUsPerJob: Spread
}

export interface IdleWindow {
  side: 'none' | 'emq' | 'bull'
  windowS: number
  commands: Record<string, number>
  perMinute: number
}

export interface EventsResults {
  jobs: number
  concurrency: number
  emq: EventsSide
  emqListen: EventsSide
  bull: EventsSide
  bullListen: EventsSide
  /** EchoMQ / BullMQ jobs/s, both with a listener; and both without. */
  ratioListen: Spread
  ratioBare: Spread
  /** 1 - jobs/s with a listener / without, run by run. */
  costEmq: Spread
  costBull: Spread
  idle: IdleWindow[]
}

const connectionUrl = (ctx: Ctx) => `redis://${ctx.redis.host}:${ctx.redis.port}`

async function oneRun(ctx: Ctx, side: Side, jobs: number): Promise<EventsRun> {
  const { meter } = ctx.redis
  await meter.flushall() // also drops EchoMQ's `listened` mark of an earlier run
  const lib = side.startsWith('bull') ? 'bull' : 'emq'
  const listen = side.endsWith('Listen')
  const queue = `ev-${side}`
  const connection = bullConnection(ctx.redis.host, ctx.redis.port)
  if (lib === 'bull') {
    const q = new BullQueue(queue, { connection, prefix: BULL_PREFIX })
    await bullAddMany(q, jobs)
    await q.close()
  } else {
    const client = ctx.redis.connect('emq-events-add')
    await emqAddMany(client, queue, jobs)
    client.disconnect()
  }
  let received = 0
  let lastEventAt = 0
  // Only a listening run waits for deliveries: an unwatched completion's timer would reject, unhandled,
  // ten minutes later, in whatever bench runs then.
  const delivered = listen ? completion(jobs, `${side}: completed events delivered`, 600_000) : undefined
  let events: QueueEvents | BullQueueEvents | undefined
  const closers: (() => Promise<void>)[] = []
  try {
    if (listen) {
      const onCompleted = () => {
        received++
        lastEventAt = performance.now()
        delivered?.one()
      }
      if (lib === 'emq') {
        const e = new QueueEvents(queue, { connection: connectionUrl(ctx), prefix: EMQ_PREFIX })
        e.on('completed', onCompleted)
        e.on('error', (err) => ctx.log(`events ${side} listener error: ${String(err)}`))
        events = e
      } else {
        const e = new BullQueueEvents(queue, { connection, prefix: BULL_PREFIX })
        e.on('completed', onCompleted)
        e.on('error', (err) => ctx.log(`events ${side} listener error: ${String(err)}`))
        events = e
      }
      const e = events
      closers.push(() => e.close())
      await events.waitUntilReady()
      await sleep(SETTLE_MS) // BullMQ's first XREAD ('$') is sent after waitUntilReady resolves
    }
    const done = completion(jobs, `${side} events throughput`)
    let lastCompletedAt = 0
    const one = () => {
      lastCompletedAt = performance.now()
      done.one()
    }
    const cpu0 = await redisCpuUs(meter)
    const t0 = performance.now()
    if (lib === 'bull') {
      const worker = new BullWorker(queue, async () => null, { connection, prefix: BULL_PREFIX, concurrency: CONCURRENCY })
      watchWorker(worker, one, done.fail)
      closers.unshift(() => worker.close())
    } else {
      const worker = new Worker(queue, async () => null, { connection: connectionUrl(ctx), prefix: EMQ_PREFIX, concurrency: CONCURRENCY })
      watchWorker(worker, one, done.fail)
      closers.unshift(() => worker.close())
    }
    await done.promise
    const ms = lastCompletedAt - t0
    const cpu = (await redisCpuUs(meter)) - cpu0
    const run: EventsRun = { jobs, ms: Math.round(ms), jobsPerSec: Math.round((jobs / ms) * 1000), redisCpuUsPerJob: cpu / jobs }
    if (delivered) {
      // Delivery is a figure, not a condition: wait for the rest a while, then count what came.
      await Promise.race([delivered.promise.catch(() => undefined), sleep(DELIVERY_TIMEOUT_MS)])
      run.received = received
      run.lagMs = Math.max(0, Math.round(lastEventAt - lastCompletedAt))
    }
    return run
  } finally {
    for (const close of closers) await close()
  }
}

/** Commands in a window of an idle queue with one listener of `side` (none: nothing connected). */
async function idleWindow(ctx: Ctx, side: IdleWindow['side'], windowS: number): Promise<IdleWindow> {
  const { meter } = ctx.redis
  await meter.flushall()
  const queue = 'ev-idle'
  const onError = (err: unknown) => ctx.log(`events idle ${side} listener error: ${String(err)}`)
  let events: QueueEvents | BullQueueEvents | undefined
  if (side === 'emq') {
    const e = new QueueEvents(queue, { connection: connectionUrl(ctx), prefix: EMQ_PREFIX })
    e.on('error', onError)
    events = e
  }
  if (side === 'bull') {
    const e = new BullQueueEvents(queue, { connection: bullConnection(ctx.redis.host, ctx.redis.port), prefix: BULL_PREFIX })
    e.on('error', onError)
    events = e
  }
  try {
    await events?.waitUntilReady()
    await sleep(SETTLE_MS)
    await resetStats(meter)
    const before = await commandStats(meter)
    await sleep(windowS * 1000)
    const stats = withoutMeter(subtract(await commandStats(meter), before))
    const commands = Object.fromEntries(Object.entries(stats).map(([cmd, v]) => [cmd, v.calls]))
    const total = Object.values(commands).reduce((a, b) => a + b, 0)
    return { side, windowS, commands, perMinute: (total * 60) / windowS }
  } finally {
    await events?.close()
  }
}

const summary = (runs: EventsRun[]): EventsSide => ({
  runs,
  jobsPerSec: spreadOf(runs, (r) => r.jobsPerSec),
  redisCpuUsPerJob: spreadOf(runs, (r) => r.redisCpuUsPerJob),
})

export async function runEvents(ctx: Ctx): Promise<EventsResults> {
  const jobs = ctx.quick ? 2_000 : 10_000
  const warmUp = ctx.quick ? 200 : 500
  // Unmeasured: each side's code compiled and warmed up once.
  for (const side of ['emqListen', 'bullListen'] as const) await oneRun(ctx, side, warmUp)
  const runs = await alternate(ROUNDS, {
    emq: () => oneRun(ctx, 'emq', jobs),
    emqListen: () => oneRun(ctx, 'emqListen', jobs),
    bull: () => oneRun(ctx, 'bull', jobs),
    bullListen: () => oneRun(ctx, 'bullListen', jobs),
  })
  const cost = (withIt: EventsRun[], without: EventsRun[]) =>
    spread(withIt.map((r, i) => 1 - r.jobsPerSec / (without[i]?.jobsPerSec ?? Number.NaN)))
  const windowS = ctx.quick ? 10 : 60
  const idle = [
    await idleWindow(ctx, 'none', ctx.quick ? 2 : 10),
    await idleWindow(ctx, 'emq', windowS),
    await idleWindow(ctx, 'bull', windowS),
  ]
  await ctx.redis.meter.flushall()
  const result: EventsResults = {
    jobs,
    concurrency: CONCURRENCY,
    emq: summary(runs.emq),
    emqListen: summary(runs.emqListen),
    bull: summary(runs.bull),
    bullListen: summary(runs.bullListen),
    ratioListen: ratios(runs.emqListen, runs.bullListen, (r) => r.jobsPerSec),
    ratioBare: ratios(runs.emq, runs.bull, (r) => r.jobsPerSec),
    costEmq: cost(runs.emqListen, runs.emq),
    costBull: cost(runs.bullListen, runs.bull),
    idle,
  }
  ctx.log(
    `events: with a listener EchoMQ ${fs(result.emqListen.jobsPerSec)} jobs/s, BullMQ ${fs(result.bullListen.jobsPerSec)} = ${xs(result.ratioListen)}; ` +
      `idle listener ${idle.map((w) => `${w.side} ${fmt(w.perMinute, 1)}/min`).join(', ')}`,
  )
  return result
}

const percent = (fraction: number) => `${fmt(fraction * 100, 1)}%`
const percents = (s: Spread) => `${percent(s.median)} (${percent(s.min)} to ${percent(s.max)})`

/** Lowest delivery over the runs, as `received of jobs`. */
function delivery(side: EventsSide): { worst: number; text: string; lag: Spread } {
  const got = side.runs.map((r) => r.received ?? 0)
  const worst = Math.min(...got)
  const jobs = side.runs[0]?.jobs ?? 0
  return { worst, text: `${fmt(worst)} of ${fmt(jobs)}`, lag: spreadOf(side.runs, (r) => r.lagMs ?? 0) }
}

export function eventsReport(r: EventsResults): string {
  const row = (name: string, s: EventsSide, listened: boolean) => {
    const d = listened ? delivery(s) : undefined
    return [name, fs(s.jobsPerSec), fmt(s.redisCpuUsPerJob.median, 1), d ? d.text : '-', d ? fs(d.lag) : '-']
  }
  const idleRow = (w: IdleWindow) => [
    w.side === 'none' ? 'no listener' : w.side === 'emq' ? 'EchoMQ QueueEvents' : 'BullMQ QueueEvents',
    `${w.windowS} s`,
    fmt(w.perMinute, 1),
    commandList(w.commands),
  ]
  return (
    `Events with a listener: ${fmt(r.jobs)} no-op jobs pre-added, one worker (concurrency ${r.concurrency}) and the listener in this ` +
    `process; jobs/s median (min-max) of ${ROUNDS} alternating runs; delivery = 'completed' events the listener received (worst run)\n` +
    table(
      ['', 'jobs/s', 'Redis CPU µs/job', 'completed events received', 'last event after the last job, ms'],
      [
        row('EchoMQ, no listener', r.emq, false),
        row('EchoMQ, QueueEvents', r.emqListen, true),
        row('BullMQ, no listener', r.bull, false),
        row('BullMQ, QueueEvents', r.bullListen, true),
      ],
    ) +
    `\n   ratio EchoMQ/BullMQ with a listener ${xs(r.ratioListen)}, without ${xs(r.ratioBare)}; ` +
    `the listener's cost (1 - with / without, run by run): EchoMQ ${percents(r.costEmq)}, BullMQ ${percents(r.costBull)}` +
    '\n   (EchoMQ writes its events stream only while a listener is there; BullMQ writes it always.)' +
    `\n   Idle queue (no worker, no job): Redis commands a minute, INFO commandstats over the window, one side at a time\n` +
    table(['', 'window', 'commands/min', 'in the window'], r.idle.map(idleRow)) +
    (r.idle.some((w) => w.side !== 'none' && w.windowS < 60)
      ? "\n   (quick: a 10 s window holds one XREAD block and no refresh of EchoMQ's listening mark (every 20 s): rough figures.)"
      : '')
  )
}

export function eventsTargets(r: EventsResults): Target[] {
  const emqD = delivery(r.emqListen)
  const bullD = delivery(r.bullListen)
  const idleOf = (side: IdleWindow['side']) => r.idle.find((w) => w.side === side)?.perMinute ?? Number.NaN
  return [
    {
      name: `events: jobs/s with a listener (c=${r.concurrency}) beside BullMQ with one, and the listener's cost (no target)`,
      pass: undefined,
      figures:
        `${fmt(r.emqListen.jobsPerSec.median)} vs ${fmt(r.bullListen.jobsPerSec.median)} jobs/s = ${xs(r.ratioListen)}; ` +
        `listener's cost EchoMQ ${percents(r.costEmq)}, BullMQ ${percents(r.costBull)}`,
    },
    {
      name: 'events: the listener receives every completed event',
      pass: emqD.worst === r.jobs,
      figures: `EchoMQ ${emqD.text} (worst run), last ${fmt(emqD.lag.median)} ms after the last job; BullMQ ${bullD.text}, ${fmt(bullD.lag.median)} ms`,
    },
    {
      name: 'events: Redis commands a minute of an idle queue with a listener, beside BullMQ (no target)',
      pass: undefined,
      figures:
        `EchoMQ ${fmt(idleOf('emq'), 1)}/min, BullMQ ${fmt(idleOf('bull'), 1)}/min = ${x(ratio(idleOf('emq'), idleOf('bull')))}; ` +
        `no listener ${fmt(idleOf('none'), 1)}/min`,
    },
  ]
}
