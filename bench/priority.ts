/**
 * Prioritized throughput: M no-op jobs added first with addBulk (1,000 a call), each with a priority from
 * 1 to LEVELS (the same pseudo-random sequence on both sides), then one worker in this process with
 * concurrency 50 (defaults otherwise) runs until all M have completed; jobs/s from starting the worker to
 * its last 'completed' event, ROUNDS alternating runs per side. Redis CPU per job from INFO cpu.
 *
 * Order: every processor call records its job, so the start order is known. A job of priority p started
 * while a job of a lower p (a higher priority) was still waiting is a violation; all jobs are waiting
 * before the worker starts, so a violation is any start of priority p while a job of lower p has not yet
 * started. Counted at concurrency 1 (one run per side: the order must be exact, 0 expected) and in the
 * concurrency 50 runs (where jobs start in parallel; reported, no target). Also counted at concurrency 1:
 * jobs started before an earlier-added job of the same priority (equal priorities run in the order added).
 */
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import { Queue, Worker } from '../lib/index.js'
import { BULL_PREFIX, bullConnection, EMQ_PREFIX } from './build.js'
import { fmt, fs, type Target, table, xs } from './format.js'
import { redisCpuUs } from './meter.js'
import { alternate, type Ctx, completion, ROUNDS, ratios, type Spread, spreadOf, watchWorker } from './util.js'

const LEVELS = 10
const CONCURRENCY = 50
const ADD_CHUNK = 1_000
const TARGET_RATIO = 1.2

type Lib = 'emq' | 'bull'

export interface PriorityRun {
  jobs: number
  concurrency: number
  ms: number
  jobsPerSec: number
  redisCpuUsPerJob: number
  /** Starts of priority p while a job of a lower p had not started. */
  violations: number
  /** Starts before an earlier-added job of the same priority. */
  fifoViolations: number
}

export interface PrioritySide {
  runs: PriorityRun[]
  jobsPerSec: Spread
  redisCpuUsPerJob: Spread
  /** The concurrency-1 run. */
  ordered: PriorityRun
}

export interface PriorityResults {
  jobs: number
  orderJobs: number
  levels: number
  concurrency: number
  emq: PrioritySide
  bull: PrioritySide
  ratio: Spread
}

/** A deterministic pseudo-random priority (1..LEVELS) per job index (mulberry32). */
export function priorities(n: number, seed = 0x5eed): number[] {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return Array.from({ length: n }, () => 1 + Math.floor(next() * LEVELS))
}

/** Violations of the start order `started` (job indexes) for jobs all waiting at the start. */
export function orderViolations(started: number[], prio: number[]): { violations: number; fifoViolations: number } {
  const left = new Array<number>(LEVELS + 2).fill(0)
  for (const i of started) left[prio[i] as number] = (left[prio[i] as number] ?? 0) + 1
  const lastOf = new Map<number, number>()
  let violations = 0
  let fifoViolations = 0
  for (const i of started) {
    const p = prio[i] as number
    for (let q = 1; q < p; q++) {
      if ((left[q] ?? 0) > 0) {
        violations++
        break
      }
    }
    left[p] = (left[p] ?? 0) - 1
    if ((lastOf.get(p) ?? -1) > i) fifoViolations++
    lastOf.set(p, Math.max(i, lastOf.get(p) ?? -1))
  }
  return { violations, fifoViolations }
}

async function addJobs(ctx: Ctx, lib: Lib, queue: string, prio: number[]): Promise<void> {
  const jobs = prio.map((priority, i) => ({ name: 'job', data: { i }, opts: { priority } }))
  if (lib === 'emq') {
    const client = ctx.redis.connect('emq-priority-add')
    const q = new Queue(queue, { connection: client, prefix: EMQ_PREFIX })
    for (let i = 0; i < jobs.length; i += ADD_CHUNK) await q.addBulk(jobs.slice(i, i + ADD_CHUNK))
    await q.close()
    client.disconnect()
  } else {
    const q = new BullQueue(queue, { connection: bullConnection(ctx.redis.host, ctx.redis.port), prefix: BULL_PREFIX })
    for (let i = 0; i < jobs.length; i += ADD_CHUNK) await q.addBulk(jobs.slice(i, i + ADD_CHUNK))
    await q.close()
  }
}

async function oneRun(ctx: Ctx, lib: Lib, concurrency: number, prio: number[]): Promise<PriorityRun> {
  const { meter } = ctx.redis
  await meter.flushall()
  const queue = `prio-${lib}-${concurrency}`
  const jobs = prio.length
  await addJobs(ctx, lib, queue, prio)
  const started: number[] = []
  const processor = async (job: { data: unknown }) => {
    started.push((job.data as { i: number }).i)
    return null
  }
  const done = completion(jobs, `${lib} prioritized throughput`)
  let lastAt = 0
  const one = () => {
    lastAt = performance.now()
    done.one()
  }
  let close: () => Promise<void> = async () => undefined
  const cpu0 = await redisCpuUs(meter)
  const t0 = performance.now()
  try {
    if (lib === 'emq') {
      const worker = new Worker(queue, processor, {
        connection: `redis://${ctx.redis.host}:${ctx.redis.port}`,
        prefix: EMQ_PREFIX,
        concurrency,
      })
      watchWorker(worker, one, done.fail)
      close = () => worker.close()
    } else {
      const worker = new BullWorker(queue, processor, {
        connection: bullConnection(ctx.redis.host, ctx.redis.port),
        prefix: BULL_PREFIX,
        concurrency,
      })
      watchWorker(worker, one, done.fail)
      close = () => worker.close()
    }
    await done.promise
  } finally {
    await close()
  }
  const ms = lastAt - t0
  const cpu = (await redisCpuUs(meter)) - cpu0
  if (started.length !== jobs) throw new Error(`${lib} prioritized: ${started.length} starts for ${jobs} jobs`)
  return {
    jobs,
    concurrency,
    ms: Math.round(ms),
    jobsPerSec: Math.round((jobs / ms) * 1000),
    redisCpuUsPerJob: cpu / jobs,
    ...orderViolations(started, prio),
  }
}

export async function runPriority(ctx: Ctx): Promise<PriorityResults> {
  const jobs = ctx.quick ? 2_000 : 10_000
  const orderJobs = ctx.quick ? 300 : 2_000
  const prio = priorities(jobs)
  const orderPrio = priorities(orderJobs, 0xc0ffee)
  // Unmeasured: each side's code compiled and warmed up once.
  for (const lib of ['emq', 'bull'] as const) await oneRun(ctx, lib, CONCURRENCY, priorities(ctx.quick ? 200 : 500, 1))
  const runs = await alternate(ROUNDS, {
    emq: () => oneRun(ctx, 'emq', CONCURRENCY, prio),
    bull: () => oneRun(ctx, 'bull', CONCURRENCY, prio),
  })
  const emqOrdered = await oneRun(ctx, 'emq', 1, orderPrio)
  const bullOrdered = await oneRun(ctx, 'bull', 1, orderPrio)
  await ctx.redis.meter.flushall()
  const side = (r: PriorityRun[], ordered: PriorityRun): PrioritySide => ({
    runs: r,
    jobsPerSec: spreadOf(r, (x) => x.jobsPerSec),
    redisCpuUsPerJob: spreadOf(r, (x) => x.redisCpuUsPerJob),
    ordered,
  })
  const result: PriorityResults = {
    jobs,
    orderJobs,
    levels: LEVELS,
    concurrency: CONCURRENCY,
    emq: side(runs.emq, emqOrdered),
    bull: side(runs.bull, bullOrdered),
    ratio: ratios(runs.emq, runs.bull, (r) => r.jobsPerSec),
  }
  ctx.log(
    `priority: EchoMQ ${fs(result.emq.jobsPerSec)} jobs/s, BullMQ ${fs(result.bull.jobsPerSec)} = ${xs(result.ratio)}; ` +
      `violations at c=1 EchoMQ ${emqOrdered.violations}, BullMQ ${bullOrdered.violations}`,
  )
  return result
}

const worst = (runs: PriorityRun[], f: (r: PriorityRun) => number) => Math.max(...runs.map(f))

export function priorityReport(r: PriorityResults): string {
  const row = (name: string, s: PrioritySide) => [
    name,
    fs(s.jobsPerSec),
    fmt(s.redisCpuUsPerJob.median, 1),
    fmt(worst(s.runs, (x) => x.violations)),
    fmt(s.ordered.jobsPerSec),
    fmt(s.ordered.violations),
    fmt(s.ordered.fifoViolations),
  ]
  return (
    `Prioritized throughput: ${fmt(r.jobs)} no-op jobs pre-added with random priorities 1..${r.levels}, one worker in this process; ` +
    `c=${r.concurrency}: jobs/s median (min-max) of ${ROUNDS} alternating runs; c=1: ${fmt(r.orderJobs)} jobs, one run, for the order\n` +
    table(
      [
        '',
        `c=${r.concurrency} jobs/s`,
        'Redis CPU µs/job',
        `c=${r.concurrency} order violations (worst run)`,
        'c=1 jobs/s',
        'c=1 order violations',
        'c=1 out of order within a priority',
      ],
      [row('EchoMQ', r.emq), row('BullMQ', r.bull)],
    ) +
    `\n   ratio jobs/s EchoMQ/BullMQ ${xs(r.ratio)}. An order violation: a job started while a job of a higher priority ` +
    '(lower number) had not started; all jobs wait before the worker starts.'
  )
}

export function priorityTargets(r: PriorityResults): Target[] {
  return [
    {
      name: `priority: jobs/s with random priorities 1..${r.levels} (c=${r.concurrency}) >= ${TARGET_RATIO}x BullMQ`,
      pass: r.ratio.median >= TARGET_RATIO,
      figures: `${fmt(r.emq.jobsPerSec.median)} vs ${fmt(r.bull.jobsPerSec.median)} jobs/s = ${xs(r.ratio)}`,
    },
    {
      name: 'priority: no job starts before a waiting job of a higher priority (c=1)',
      pass: r.emq.ordered.violations === 0,
      figures:
        `EchoMQ ${r.emq.ordered.violations} violations in ${fmt(r.orderJobs)} starts (${r.emq.ordered.fifoViolations} out of order within a priority); ` +
        `BullMQ ${r.bull.ordered.violations} (${r.bull.ordered.fifoViolations}); at c=${r.concurrency}: EchoMQ ` +
        `${worst(r.emq.runs, (x) => x.violations)}, BullMQ ${worst(r.bull.runs, (x) => x.violations)} (worst run)`,
    },
  ]
}
