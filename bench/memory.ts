/**
 * Memory per job: Redis `used_memory` (INFO memory) per waiting job and per completed job kept by
 * retention. For each side: a few jobs run first (scripts cached, the queue's own keys made); then with
 * only the meter connected the server is measured empty, after adding N jobs of DATA_BYTES bytes of JSON
 * data, and after a worker (concurrency 50) has completed them all and closed. Bytes per waiting job =
 * growth / N; per completed job kept = growth / jobs left in `completed`. BullMQ's figures include its
 * events stream (one entry per event, capped near 10,000 entries), which it keeps per queue.
 *
 * The helpers here (adding and completing jobs of each side, reading used_memory) serve bench/retention.ts too.
 */
import { type DefaultJobOptions as BullJobsOptions, Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import type { Redis } from 'ioredis'
import { Worker } from '../lib/index.js'
import type { JobOptions } from '../lib/queue.js'
import { queueKeys } from '../lib/redis/keys.js'
import { BULL_PREFIX, bullAddMany, bullConnection, bullKey, EMQ_PREFIX, emqAddMany } from './build.js'
import { fmt, type Target, table, x } from './format.js'
import { type Ctx, completion, payload, ratio, sleep, watchWorker } from './util.js'

export const DATA_BYTES = 100
export const CONCURRENCY = 50
const WARM_JOBS = 10

export interface Config {
  lib: 'emq' | 'bull'
  label: string
  /** The queue's defaultJobOptions; none: the library's defaults. */
  emqOptions?: Omit<JobOptions, 'jobId'>
  bullOptions?: BullJobsOptions
}

export const CONFIGS = {
  emq: { lib: 'emq', label: 'EchoMQ defaults (last 1,000 completed kept for a day)' },
  emqKeep: { lib: 'emq', label: 'EchoMQ removeOnComplete: false (all kept)', emqOptions: { removeOnComplete: false } },
  bull: { lib: 'bull', label: 'BullMQ defaults (all kept)' },
  // BullMQ's age is in seconds.
  bullCount: {
    lib: 'bull',
    label: 'BullMQ removeOnComplete { count: 1000, age: 86400 s }',
    bullOptions: { removeOnComplete: { count: 1000, age: 86_400 } },
  },
} as const satisfies Record<string, Config>

/** How long usedMemory waits at most for the server to settle, and how often it reads meanwhile. */
const SETTLE_MS = 3_000
const SETTLE_EVERY_MS = 150

/**
 * The server's used_memory once it has settled: after many keys were deleted, the keyspace's hash table
 * still has the buckets of its peak (512 KiB after 40,000 keys) until serverCron shrinks and rehashes it,
 * within a cron or two (hz 10). Read right after a step, the figure said when the cron last ran, not what
 * the jobs hold; so it is read until three reads in a row agree within 1 KiB (or SETTLE_MS passed).
 */
export async function usedMemory(meter: Redis): Promise<number> {
  const read = async () => Number(/^used_memory:(\d+)/m.exec(await meter.info('memory'))?.[1] ?? Number.NaN)
  const deadline = performance.now() + SETTLE_MS
  let last = await read()
  let agreeing = 1
  while (agreeing < 3 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, SETTLE_EVERY_MS))
    const now = await read()
    agreeing = Math.abs(now - last) <= 1024 ? agreeing + 1 : 1
    last = now
  }
  return last
}

/** Adds jobs `from` .. `from + n - 1` (`dataBytes` of data each) with the config's job options. */
export async function addJobs(ctx: Ctx, config: Config, queue: string, from: number, n: number, dataBytes = DATA_BYTES): Promise<void> {
  const dataOf = (i: number) => payload(from + i, dataBytes)
  if (config.lib === 'emq') {
    const client = ctx.redis.connect('emq-memory-add')
    await emqAddMany(client, queue, n, { dataOf, ...(config.emqOptions ? { defaultJobOptions: config.emqOptions } : {}) })
    await client.quit()
  } else {
    const q = new BullQueue(queue, {
      connection: bullConnection(ctx.redis.host, ctx.redis.port),
      prefix: BULL_PREFIX,
      ...(config.bullOptions ? { defaultJobOptions: config.bullOptions } : {}),
    })
    await bullAddMany(q, n, dataOf)
    await q.close()
  }
}

/** Runs a worker (concurrency 50, defaults otherwise) until `n` jobs have completed, then closes it. */
export async function completeJobs(ctx: Ctx, config: Config, queue: string, n: number): Promise<void> {
  const done = completion(n, `${config.label}: completing ${n} jobs`)
  const worker =
    config.lib === 'emq'
      ? new Worker(queue, async () => null, {
          connection: `redis://${ctx.redis.host}:${ctx.redis.port}`,
          prefix: EMQ_PREFIX,
          concurrency: CONCURRENCY,
        })
      : new BullWorker(queue, async () => null, {
          connection: bullConnection(ctx.redis.host, ctx.redis.port),
          prefix: BULL_PREFIX,
          concurrency: CONCURRENCY,
        })
  watchWorker(worker, done.one, done.fail)
  try {
    await done.promise
  } finally {
    await worker.close()
  }
  await sleep(100) // closed connections are freed by the server
}

export const completedCount = (meter: Redis, config: Config, queue: string) =>
  config.lib === 'emq' ? meter.zcard(queueKeys(EMQ_PREFIX, queue).completed) : meter.zcard(bullKey(queue, 'completed'))

/** A fresh server with the side's queue warmed up: scripts cached, its own keys made. */
export async function warmQueue(ctx: Ctx, config: Config, queue: string): Promise<void> {
  await ctx.redis.meter.flushall()
  await ctx.redis.meter.script('FLUSH')
  await addJobs(ctx, config, queue, 0, WARM_JOBS)
  await completeJobs(ctx, config, queue, WARM_JOBS)
}

export interface MemoryRow {
  side: keyof typeof CONFIGS
  label: string
  dataBytes: number
  jobs: number
  waitingBytesPerJob: number
  completedKept: number
  completedBytesPerJob: number
}

export interface MemoryResults {
  jobs: number
  dataSizes: number[]
  rows: MemoryRow[]
}

/** Job data sizes measured (bytes of JSON): a small payload, and 1 KiB. */
const DATA_SIZES = [DATA_BYTES, 1024]
/** Most EchoMQ may use per job, as a multiple of BullMQ's (waiting, and completed kept), at every size. */
const TARGET_RATIO = 1.0

async function measureSide(ctx: Ctx, side: keyof typeof CONFIGS, jobs: number, dataBytes: number): Promise<MemoryRow> {
  const config = CONFIGS[side]
  const queue = 'mem'
  const { meter } = ctx.redis
  await warmQueue(ctx, config, queue)
  const keptBefore = await completedCount(meter, config, queue)
  const empty = await usedMemory(meter)
  await addJobs(ctx, config, queue, WARM_JOBS, jobs, dataBytes)
  await sleep(100)
  const waiting = await usedMemory(meter)
  await completeJobs(ctx, config, queue, jobs)
  const completed = await usedMemory(meter)
  const kept = (await completedCount(meter, config, queue)) - keptBefore
  return {
    side,
    label: config.label,
    dataBytes,
    jobs,
    waitingBytesPerJob: (waiting - empty) / jobs,
    completedKept: kept,
    completedBytesPerJob: kept > 0 ? (completed - empty) / kept : Number.NaN,
  }
}

export async function runMemory(ctx: Ctx): Promise<MemoryResults> {
  const jobs = ctx.quick ? 2_000 : 10_000
  const rows: MemoryRow[] = []
  for (const dataBytes of DATA_SIZES) {
    for (const side of ['emq', 'emqKeep', 'bull'] as const) rows.push(await measureSide(ctx, side, jobs, dataBytes))
  }
  await ctx.redis.meter.flushall()
  ctx.log(
    `memory: ${rows.map((r) => `${r.side}/${r.dataBytes} B ${fmt(r.waitingBytesPerJob)} B/waiting, ${fmt(r.completedBytesPerJob)} B/completed`).join('; ')}`,
  )
  return { jobs, dataSizes: DATA_SIZES, rows }
}

export function memoryReport(r: MemoryResults): string {
  const bullOf = (m: MemoryRow) => r.rows.find((b) => b.side === 'bull' && b.dataBytes === m.dataBytes)
  return (
    `Memory per job: Redis used_memory growth, ${fmt(r.jobs)} jobs of ${r.dataSizes.join(' and ')} bytes of JSON data; one run\n` +
    table(
      ['', 'data', 'bytes/waiting job', 'vs BullMQ', 'completed kept', 'bytes/completed job kept', 'vs BullMQ'],
      r.rows.map((m) => {
        const bull = bullOf(m)
        return [
          m.label,
          `${fmt(m.dataBytes)} B`,
          fmt(m.waitingBytesPerJob),
          bull ? x(ratio(m.waitingBytesPerJob, bull.waitingBytesPerJob)) : '',
          fmt(m.completedKept),
          fmt(m.completedBytesPerJob),
          bull ? x(ratio(m.completedBytesPerJob, bull.completedBytesPerJob)) : '',
        ]
      }),
    ) +
    '\n   BullMQ includes its events stream (capped near 10,000 entries); EchoMQ keeps none while no QueueEvents listens.' +
    '\n   Completed jobs kept are compared with every job kept on both sides (EchoMQ removeOnComplete: false, BullMQ defaults).'
  )
}

export function memoryTargets(r: MemoryResults): Target[] {
  return r.dataSizes.flatMap((size) => {
    const row = (side: MemoryRow['side']) => r.rows.find((m) => m.side === side && m.dataBytes === size)
    const [emq, keep, bull] = [row('emq'), row('emqKeep'), row('bull')]
    if (!emq || !keep || !bull) return []
    const waiting = ratio(emq.waitingBytesPerJob, bull.waitingBytesPerJob)
    const completed = ratio(keep.completedBytesPerJob, bull.completedBytesPerJob)
    return [
      {
        name: `memory, ${size} B of data: bytes per waiting job <= ${TARGET_RATIO}x BullMQ's (one run)`,
        pass: waiting <= TARGET_RATIO,
        figures: `${fmt(emq.waitingBytesPerJob)} vs ${fmt(bull.waitingBytesPerJob)} B = ${x(waiting)}`,
      },
      {
        name: `memory, ${size} B of data: bytes per completed job kept <= ${TARGET_RATIO}x BullMQ's (one run)`,
        pass: completed <= TARGET_RATIO,
        figures: `${fmt(keep.completedBytesPerJob)} vs ${fmt(bull.completedBytesPerJob)} B = ${x(completed)}`,
      },
    ]
  })
}
