/**
 * Rate-limited accuracy: one queue, a limiter of MAX starts per DURATION_MS shared by PROCESSES worker
 * processes (bench/ratelimit-worker.ts, concurrency CONCURRENCY each, no-op jobs), each side with its own
 * Worker `limiter: { max, duration }` option. More jobs are added first than can start in the run, so
 * the limiter, not the supply, paces the workers. The workers run for WINDOW + RUN_TAIL_MS, then stop and
 * report every start.
 *
 * Each start is timed twice: by its library's own stamp (job.processedOn: Redis's clock for EchoMQ, whose
 * limiter counts by it; the client's clock that BullMQ passes to its script) and by Date.now when the
 * processor was called (one machine, one clock; it adds the take's reply latency to each start). Figures:
 * the most starts in any window [t, t + DURATION_MS) over the whole run, and the mean rate over
 * [first start, first start + WINDOW). Target (EchoMQ, its own stamp): never over MAX, mean within 10% of
 * MAX per DURATION_MS. BullMQ's limiter counts a fixed window, so up to 2 x MAX may start across a window's
 * edge. One run per side with --quick, ROUNDS alternating runs in a full run; the worst window of the runs
 * and the spread of the means are reported.
 */
import { fileURLToPath } from 'node:url'
import { Queue as BullQueue } from 'bullmq'
import { killAndWait } from '../cli/support/worker-process.js'
import { Queue } from '../lib/index.js'
import { BULL_PREFIX, bullConnection, EMQ_PREFIX } from './build.js'
import { fmt, fs, type Target, table } from './format.js'
import type { LimitedRunMessage, LimitedStoppedMessage } from './ratelimit-worker.js'
import { type Child, spawnChild } from './throughput.js'
import { alternate, type Ctx, median, queueTarget, type Spread, sleep, spreadOf } from './util.js'

const PROCESSES = 4
const CONCURRENCY = 50
const MAX = 100
const DURATION_MS = 1_000
/** Run on past the measured window, so the window's end is not where the workers stop. */
const RUN_TAIL_MS = 1_500
const ADD_CHUNK = 1_000
/** Mean rate within this fraction of the limit. */
const TOLERANCE = 0.1
const CHILD = fileURLToPath(new URL('./ratelimit-worker.ts', import.meta.url))

type Lib = 'emq' | 'bull'

export interface ClockFigures {
  /** Most starts in any window [t, t + DURATION_MS). */
  maxInWindow: number
  /** Starts in [first, first + window) per DURATION_MS. */
  meanPerDuration: number
}

export interface RateLimitRun {
  starts: number
  /** By the library's own start stamp (job.processedOn). */
  stamped: ClockFigures
  /** By Date.now when each processor was called. */
  client: ClockFigures
  perProcess: number[]
  /** Processor clock minus own stamp, per start (ms): median and max. */
  delayMedianMs: number
  delayMaxMs: number
}

export interface RateLimitSide {
  runs: RateLimitRun[]
  maxInWindow: number
  clientMaxInWindow: number
  meanPerDuration: Spread
}

export interface RateLimitResults {
  max: number
  durationMs: number
  windowMs: number
  processes: number
  concurrency: number
  emq: RateLimitSide
  bull: RateLimitSide
}

/** The most of the sorted times in any window [t, t + span). */
export function maxInAnyWindow(sorted: number[], span: number): number {
  let best = 0
  let j = 0
  for (let i = 0; i < sorted.length; i++) {
    if (j < i) j = i
    while (j < sorted.length && (sorted[j] as number) < (sorted[i] as number) + span) j++
    best = Math.max(best, j - i)
  }
  return best
}

function figures(times: number[], windowMs: number): ClockFigures {
  const sorted = times.filter(Number.isFinite).sort((a, b) => a - b)
  const first = sorted[0] ?? 0
  const inWindow = sorted.filter((t) => t < first + windowMs).length
  return { maxInWindow: maxInAnyWindow(sorted, DURATION_MS), meanPerDuration: (inWindow * DURATION_MS) / windowMs }
}

async function addJobs(ctx: Ctx, lib: Lib, queue: string, n: number): Promise<void> {
  const jobs = Array.from({ length: n }, (_, i) => ({ name: 'job', data: { i } }))
  if (lib === 'emq') {
    const client = ctx.redis.connect('emq-ratelimit-add')
    const q = new Queue(queue, { connection: client, prefix: EMQ_PREFIX })
    for (let i = 0; i < n; i += ADD_CHUNK) await q.addBulk(jobs.slice(i, i + ADD_CHUNK))
    await q.close()
    client.disconnect()
  } else {
    const q = new BullQueue(queue, { connection: bullConnection(ctx.redis.host, ctx.redis.port), prefix: BULL_PREFIX })
    for (let i = 0; i < n; i += ADD_CHUNK) await q.addBulk(jobs.slice(i, i + ADD_CHUNK))
    await q.close()
  }
}

async function oneRun(ctx: Ctx, children: Child[], lib: Lib, windowMs: number): Promise<RateLimitRun> {
  await ctx.redis.meter.flushall()
  const queue = `limited-${lib}`
  // Twice what the limiter lets start in the run, and at least a window's worth more.
  await addJobs(ctx, lib, queue, Math.ceil(((windowMs + RUN_TAIL_MS) / DURATION_MS) * MAX * 2) + MAX)
  const msg: LimitedRunMessage = {
    type: 'run',
    ...queueTarget(ctx, lib, queue),
    concurrency: CONCURRENCY,
    max: MAX,
    duration: DURATION_MS,
  }
  for (const c of children) c.process.send(msg)
  await sleep(windowMs + RUN_TAIL_MS)
  for (const c of children) c.process.send({ type: 'stop' })
  const stopped = (await Promise.all(children.map((c) => c.next('stopped')))) as LimitedStoppedMessage[]
  const errors = stopped.flatMap((s) => s.errors)
  if (errors.length) throw new Error(`${lib} rate limit: ${errors.slice(0, 3).join('; ')}`)
  const starts = stopped.flatMap((s) => s.starts)
  const delays = starts.map(([stamp, called]) => called - stamp).filter(Number.isFinite)
  return {
    starts: starts.length,
    stamped: figures(
      starts.map((s) => s[0]),
      windowMs,
    ),
    client: figures(
      starts.map((s) => s[1]),
      windowMs,
    ),
    perProcess: stopped.map((s) => s.starts.length),
    delayMedianMs: median(delays),
    delayMaxMs: Math.max(...delays),
  }
}

const summary = (runs: RateLimitRun[]): RateLimitSide => ({
  runs,
  maxInWindow: Math.max(...runs.map((r) => r.stamped.maxInWindow)),
  clientMaxInWindow: Math.max(...runs.map((r) => r.client.maxInWindow)),
  meanPerDuration: spreadOf(runs, (r) => r.stamped.meanPerDuration),
})

export async function runRateLimit(ctx: Ctx): Promise<RateLimitResults> {
  const windowMs = ctx.quick ? 3_000 : 10_000
  const rounds = ctx.quick ? 1 : 3
  let children: Child[] = []
  try {
    children = await Promise.all(Array.from({ length: PROCESSES }, () => spawnChild(CHILD)))
    const runs = await alternate(rounds, {
      emq: () => oneRun(ctx, children, 'emq', windowMs),
      bull: () => oneRun(ctx, children, 'bull', windowMs),
    })
    const result: RateLimitResults = {
      max: MAX,
      durationMs: DURATION_MS,
      windowMs,
      processes: PROCESSES,
      concurrency: CONCURRENCY,
      emq: summary(runs.emq),
      bull: summary(runs.bull),
    }
    ctx.log(
      `ratelimit: most starts in any ${DURATION_MS} ms: EchoMQ ${result.emq.maxInWindow}, BullMQ ${result.bull.maxInWindow}; ` +
        `mean per ${DURATION_MS} ms EchoMQ ${fs(result.emq.meanPerDuration, 1)}, BullMQ ${fs(result.bull.meanPerDuration, 1)}`,
    )
    return result
  } finally {
    for (const c of children) c.process.send({ type: 'exit' })
    await Promise.all(children.map((c) => sleep(500).then(() => killAndWait(c.process))))
    await ctx.redis.meter.flushall()
  }
}

export function rateLimitReport(r: RateLimitResults): string {
  const row = (name: string, s: RateLimitSide) => [
    name,
    fmt(s.maxInWindow),
    fmt(s.clientMaxInWindow),
    fs(s.meanPerDuration, 1),
    s.runs.map((run) => fmt(run.starts)).join(', '),
    `${fmt(median(s.runs.map((run) => run.delayMedianMs)))} / ${fmt(Math.max(...s.runs.map((run) => run.delayMaxMs)))}`,
    s.runs.map((run) => run.perProcess.join('/')).join('; '),
  ]
  const runs = r.emq.runs.length
  return (
    `Rate limit: limiter { max: ${r.max}, duration: ${fmt(r.durationMs)} } shared by ${r.processes} worker processes ` +
    `(concurrency ${r.concurrency} each), no-op jobs, measured over ${fmt(r.windowMs / 1000)} s; ` +
    `${runs === 1 ? 'one run per side' : `${runs} alternating runs per side, worst window of the runs`}\n` +
    table(
      [
        '',
        `most starts in any ${fmt(r.durationMs)} ms (own stamp)`,
        '(processor clock)',
        `mean starts per ${fmt(r.durationMs)} ms`,
        'starts in the run',
        'processor call - stamp, median / max ms',
        'per process',
      ],
      [row('EchoMQ', r.emq), row('BullMQ', r.bull)],
    ) +
    '\n   own stamp = job.processedOn (EchoMQ: Redis clock, which its sliding-window limiter counts by; BullMQ: its client clock, ' +
    'fixed window); processor clock = Date.now when the processor was called (adds reply latency).'
  )
}

export function rateLimitTargets(r: RateLimitResults): Target[] {
  const mean = r.emq.meanPerDuration
  const lo = r.max * (1 - TOLERANCE)
  const hi = r.max * (1 + TOLERANCE)
  return [
    {
      name: `ratelimit: ${r.processes} processes never start more than ${r.max} jobs in any ${fmt(r.durationMs)} ms`,
      pass: r.emq.maxInWindow <= r.max,
      figures: `EchoMQ most ${r.emq.maxInWindow} (processor clock ${r.emq.clientMaxInWindow}); BullMQ most ${r.bull.maxInWindow} (${r.bull.clientMaxInWindow})`,
    },
    {
      name: `ratelimit: mean rate within ${fmt(TOLERANCE * 100)}% of ${r.max} per ${fmt(r.durationMs)} ms`,
      pass: mean.min >= lo && mean.max <= hi,
      figures: `EchoMQ ${fs(mean, 1)} per ${fmt(r.durationMs)} ms; BullMQ ${fs(r.bull.meanPerDuration, 1)}`,
    },
  ]
}
