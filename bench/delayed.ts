/**
 * Delayed start latency: N delayed jobs, delays spread evenly over a few seconds, taken by WORKERS idle
 * workers of concurrency CONCURRENCY each (defaults otherwise), all in this process. A job's start latency
 * is when its processor started minus (when add() was called + its delay), both by this process's
 * Date.now; jobs are added one at a time, so each add runs right after its time is taken. The workers are
 * idle (blocked) when the jobs are added. One run per side.
 */
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import { Queue, Worker } from '../lib/index.js'
import { BULL_PREFIX, bullConnection, EMQ_PREFIX } from './build.js'
import { fmt, type Target, table } from './format.js'
import { type Ctx, completion, median, quantile, sleep } from './util.js'

const WORKERS = 3
const CONCURRENCY = 4
const TARGET_P99_MS = 100

export interface DelayedSide {
  jobs: number
  medianMs: number
  p99Ms: number
  maxMs: number
  minMs: number
}

export interface DelayedResults {
  jobs: number
  delayMs: [number, number]
  emq: DelayedSide
  bull: DelayedSide
}

function summary(latencies: number[]): DelayedSide {
  return {
    jobs: latencies.length,
    medianMs: median(latencies),
    p99Ms: quantile(latencies, 0.99),
    maxMs: Math.max(...latencies),
    minMs: Math.min(...latencies),
  }
}

/** add(i, delay): adds job i (data { i }) with the delay. */
async function adder(ctx: Ctx, lib: 'emq' | 'bull', queue: string, closers: (() => Promise<void>)[]) {
  if (lib === 'emq') {
    const q = new Queue(queue, { connection: `redis://${ctx.redis.host}:${ctx.redis.port}`, prefix: EMQ_PREFIX })
    closers.push(() => q.close())
    return async (i: number, delay: number) => void (await q.add('job', { i }, { delay }))
  }
  const q = new BullQueue(queue, { connection: bullConnection(ctx.redis.host, ctx.redis.port), prefix: BULL_PREFIX })
  closers.push(() => q.close())
  await q.waitUntilReady()
  return async (i: number, delay: number) => void (await q.add('job', { i }, { delay }))
}

async function side(ctx: Ctx, lib: 'emq' | 'bull', n: number, [from, to]: [number, number]): Promise<DelayedSide> {
  await ctx.redis.meter.flushall()
  const queue = `delayed-${lib}`
  const delayOf = (i: number) => Math.round(from + ((to - from) * i) / n)
  const addedAt = new Array<number>(n).fill(0)
  const startedAt = new Array<number>(n).fill(0)
  const done = completion(n, `${lib} delayed jobs`, to + 30_000)
  const processor = async (job: { data: unknown }) => {
    const i = (job.data as { i: number }).i
    startedAt[i] = Date.now()
    done.one()
  }
  const closers: (() => Promise<void>)[] = []
  const connection = bullConnection(ctx.redis.host, ctx.redis.port)
  try {
    for (let w = 0; w < WORKERS; w++) {
      if (lib === 'emq') {
        const worker = new Worker(queue, processor, {
          connection: `redis://${ctx.redis.host}:${ctx.redis.port}`,
          prefix: EMQ_PREFIX,
          concurrency: CONCURRENCY,
        })
        worker.on('error', done.fail)
        closers.push(() => worker.close())
      } else {
        const worker = new BullWorker(queue, processor, { connection, prefix: BULL_PREFIX, concurrency: CONCURRENCY })
        worker.on('error', done.fail)
        closers.push(() => worker.close())
      }
    }
    await sleep(1_000) // the workers find nothing and block
    // One add at a time, so each runs right after its time is taken.
    const add = await adder(ctx, lib, queue, closers)
    for (let i = 0; i < n; i++) {
      addedAt[i] = Date.now()
      await add(i, delayOf(i))
    }
    await done.promise
  } finally {
    for (const close of closers) await close()
  }
  return summary(startedAt.map((t, i) => t - ((addedAt[i] ?? 0) + delayOf(i))))
}

export async function runDelayed(ctx: Ctx): Promise<DelayedResults> {
  const n = ctx.quick ? 100 : 300
  const delayMs: [number, number] = ctx.quick ? [300, 1_300] : [500, 3_500]
  const emq = await side(ctx, 'emq', n, delayMs)
  const bull = await side(ctx, 'bull', n, delayMs)
  await ctx.redis.meter.flushall()
  ctx.log(
    `delayed: EchoMQ median ${fmt(emq.medianMs)} ms p99 ${fmt(emq.p99Ms)} ms; BullMQ median ${fmt(bull.medianMs)} ms p99 ${fmt(bull.p99Ms)} ms`,
  )
  return { jobs: n, delayMs, emq, bull }
}

export function delayedReport(r: DelayedResults): string {
  const row = (name: string, s: DelayedSide) => [name, fmt(s.jobs), fmt(s.minMs), fmt(s.medianMs), fmt(s.p99Ms), fmt(s.maxMs)]
  return (
    `Delayed start latency: ${r.jobs} jobs, delays ${fmt(r.delayMs[0])}-${fmt(r.delayMs[1])} ms spread evenly, ${WORKERS} idle workers x ` +
    `concurrency ${CONCURRENCY}; latency = processor start - (add() called + delay), Date.now of this process; one run\n` +
    table(['', 'jobs', 'min ms', 'median ms', 'p99 ms', 'max ms'], [row('EchoMQ', r.emq), row('BullMQ', r.bull)])
  )
}

export function delayedTargets(r: DelayedResults): Target[] {
  return [
    {
      name: `delayed: start latency p99 < ${TARGET_P99_MS} ms`,
      pass: r.emq.p99Ms < TARGET_P99_MS,
      figures: `EchoMQ median ${fmt(r.emq.medianMs)} ms, p99 ${fmt(r.emq.p99Ms)} ms (BullMQ median ${fmt(r.bull.medianMs)} ms, p99 ${fmt(r.bull.p99Ms)} ms)`,
    },
  ]
}
