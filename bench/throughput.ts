/**
 * Throughput: M no-op jobs added first, then one worker in this process (concurrency c, lockDuration
 * 30000, other options at their defaults) runs until all M have completed. jobs/s is measured on the
 * client (from starting the worker to the last 'completed' event). From Redis itself: script calls per job
 * (EVALSHA/EVAL calls in INFO commandstats, always top-level) and Redis CPU per job (INFO cpu,
 * user + sys). SLOWLOG is off here: logging every command would slow both sides.
 */
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import type { Redis } from 'ioredis'
import { Worker } from '../lib/index.js'
import { BULL_PREFIX, bullConnection, EMQ_PREFIX, emqAdd } from './build.js'
import { type CmdStats, commandStats, redisCpuUs, resetStats, SCRIPT_CMDS, subtract, sum, withoutMeter } from './meter.js'
import type { Ctx } from './util.js'

const TIMEOUT_MS = 180_000

export interface ThroughputSide {
  jobs: number
  ms: number
  jobsPerSec: number
  scriptCallsPerJob: number
  redisCpuUsPerJob: number
  commandstats: CmdStats
}

export interface ThroughputRow {
  concurrency: number
  jobs: number
  emq: ThroughputSide
  bull: ThroughputSide
}

function completion(total: number, what: string) {
  let done = 0
  let resolve!: () => void
  let reject!: (err: Error) => void
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  const timer = setTimeout(() => reject(new Error(`${what}: ${done} of ${total} jobs completed after ${TIMEOUT_MS} ms`)), TIMEOUT_MS)
  return {
    promise: promise.finally(() => clearTimeout(timer)),
    one: () => {
      if (++done === total) resolve()
    },
    fail: (err: unknown) => reject(err instanceof Error ? err : new Error(String(err))),
  }
}

async function measure(meter: Redis, jobs: number, run: () => Promise<void>): Promise<ThroughputSide> {
  await resetStats(meter)
  const before = await commandStats(meter)
  const cpu0 = await redisCpuUs(meter)
  const t0 = performance.now()
  await run()
  const ms = performance.now() - t0
  const cpu = (await redisCpuUs(meter)) - cpu0
  const stats = withoutMeter(subtract(await commandStats(meter), before))
  return {
    jobs,
    ms: Math.round(ms),
    jobsPerSec: Math.round((jobs / ms) * 1000),
    scriptCallsPerJob: sum(stats, SCRIPT_CMDS).calls / jobs,
    redisCpuUsPerJob: cpu / jobs,
    commandstats: stats,
  }
}

async function emqSide(ctx: Ctx, concurrency: number, jobs: number): Promise<ThroughputSide> {
  const client = ctx.redis.connect(`emq-throughput-${concurrency}`)
  const queue = `tp-${concurrency}`
  try {
    await emqAdd(client, queue, 0, jobs)
    let worker: Worker | undefined
    const side = await measure(ctx.redis.meter, jobs, async () => {
      const done = completion(jobs, 'EchoMQ throughput')
      worker = new Worker(queue, async () => null, { connection: client, prefix: EMQ_PREFIX, concurrency })
      worker.on('completed', done.one)
      worker.on('failed', (_job, err) => done.fail(err))
      worker.on('error', done.fail)
      await done.promise
    })
    await worker?.close()
    return side
  } finally {
    client.disconnect()
  }
}

async function bullSide(ctx: Ctx, concurrency: number, jobs: number): Promise<ThroughputSide> {
  const connection = bullConnection(ctx.redis.host, ctx.redis.port)
  const name = `tp-${concurrency}`
  const queue = new BullQueue(name, { connection, prefix: BULL_PREFIX })
  try {
    for (let i = 0; i < jobs; i += 1000) {
      await queue.addBulk(Array.from({ length: Math.min(1000, jobs - i) }, (_, j) => ({ name: 'job', data: { i: i + j } })))
    }
    const done = completion(jobs, 'BullMQ throughput')
    const worker = new BullWorker(name, async () => null, {
      connection,
      prefix: BULL_PREFIX,
      concurrency,
      lockDuration: 30_000,
      autorun: false,
    })
    worker.on('completed', done.one)
    worker.on('failed', (_job, err) => done.fail(err))
    worker.on('error', done.fail)
    await worker.waitUntilReady()
    try {
      return await measure(ctx.redis.meter, jobs, async () => {
        void worker.run().catch(done.fail)
        await done.promise
      })
    } finally {
      await worker.close()
    }
  } finally {
    await queue.close()
  }
}

export async function runThroughput(ctx: Ctx): Promise<ThroughputRow[]> {
  const cases = ctx.quick
    ? [
        { concurrency: 1, jobs: 300 },
        { concurrency: 50, jobs: 1_500 },
      ]
    : [
        { concurrency: 1, jobs: 2_000 },
        { concurrency: 50, jobs: 10_000 },
      ]
  const rows: ThroughputRow[] = []
  for (const { concurrency, jobs } of cases) {
    await ctx.redis.meter.flushall()
    const emq = await emqSide(ctx, concurrency, jobs)
    await ctx.redis.meter.flushall()
    const bull = await bullSide(ctx, concurrency, jobs)
    await ctx.redis.meter.flushall()
    ctx.log(`throughput c=${concurrency} M=${jobs}: EchoMQ ${emq.jobsPerSec} jobs/s, BullMQ ${bull.jobsPerSec} jobs/s`)
    rows.push({ concurrency, jobs, emq, bull })
  }
  return rows
}
