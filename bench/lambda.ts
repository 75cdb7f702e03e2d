/**
 * `npx tsx bench/lambda.ts` [--jobs 5000] [--samples 40]: worker functions (echomq/lambda) measured on a private
 * redis-server, with the reaper starting them through the AWS SDK's Lambda client against a local endpoint that
 * runs the handler in this process (so no cold start is in these figures: add Lambda's). Not run by the tests.
 *
 *   start     a job added to an empty queue with no worker: time from the reaper's pass to the job's start,
 *             and the whole latency at the reaper's defaults (a pass a minute: the job waits for the next one)
 *   jobs/s    one invocation at concurrency 1 and 50 against a long-running Worker (no-op jobs)
 *   commands  Redis commands (the server's count) and invocations per 10,000 jobs, producer apart; and a
 *             reaper pass over an empty queue
 */
import { parseArgs } from 'node:util'
import { Queue, Worker } from '../lib/index.js'
import { createWorkerHandler } from '../lib/lambda/index.js'
import { reaperConfig } from '../lib/reaper/config.js'
import { createReaper } from '../lib/reaper/reaper.js'
import { startLambdaEndpoint } from '../test/helpers/lambda-endpoint.js'
import { startRedis } from './redis.js'

const { values } = parseArgs({ options: { jobs: { type: 'string', default: '5000' }, samples: { type: 'string', default: '40' } } })
const JOBS = Number(values.jobs)
const SAMPLES = Number(values.samples)
const SCHEDULE_MS = 60_000 // the reaper's default: one sweep a minute (rate(1 minute), sweepsPerInvocation 1)

Object.assign(process.env, { AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'AKIABENCH', AWS_SECRET_ACCESS_KEY: 'bench' })

const redis = await startRedis()
const url = `redis://${redis.host}:${redis.port}`
const endpoint = await startLambdaEndpoint()
process.env.AWS_ENDPOINT_URL_LAMBDA = endpoint.url
const context = () => {
  const end = performance.now() + 900_000
  return { getRemainingTimeInMillis: () => end - performance.now() }
}
/**
 * Commands the clients sent, as a per-command service bills them: counted with MONITOR, leaving out the
 * commands scripts run inside (one EVALSHA is one command) and MONITOR's own.
 */
async function commandCounter() {
  const monitor = await redis.connect('bench-monitor').monitor()
  let count = 0
  monitor.on('monitor', (_time: string, _args: string[], source: string) => {
    if (source !== 'lua') count++
  })
  return { read: () => count, stop: () => monitor.disconnect() }
}
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN
}
const ms = (n: number) => `${n.toFixed(1)} ms`
/** The wait for the next pass (uniform over the schedule) at quantile q, plus the measured start. */
const atDefaults = (q: number, startMs: number) => `${((SCHEDULE_MS * q + startMs) / 1000).toFixed(1)} s`

function reaperFor(queue: string, jobsPerInvocation: number, maxConcurrency: number) {
  const config = reaperConfig(
    {},
    {
      REDIS_URL: url,
      METRICS_MODE: 'off',
      QUEUES: queue,
      WORKER_FUNCTIONS: JSON.stringify({ [queue]: { function: `${queue}-fn`, maxConcurrency, jobsPerInvocation } }),
    },
  )
  return createReaper(config, { log: () => undefined })
}

// ---- start latency -----------------------------------------------------------------------------------
async function startLatency() {
  const queue = new Queue('start', { connection: url })
  let started: (() => void) | undefined
  const work = createWorkerHandler('start', async () => started?.(), { connection: url })
  endpoint.onInvoke((call) => work(call.payload, context()))
  const reaper = reaperFor('start', 100, 1)
  await reaper.run() // warm: the connection, the scripts, the Lambda client
  const samples: number[] = []
  for (let i = 0; i < SAMPLES; i++) {
    const running = new Promise<void>((resolve) => (started = resolve))
    await queue.add('j', { i })
    const t0 = performance.now()
    await reaper.run()
    await running
    samples.push(performance.now() - t0)
    await endpoint.settled()
  }
  endpoint.onInvoke(undefined)
  await Promise.all([reaper.close(), work.close(), queue.close()])
  return { p50: pct(samples, 50), p99: pct(samples, 99) }
}

// ---- jobs per second ---------------------------------------------------------------------------------
async function invocationRate(concurrency: number) {
  const name = `rate-${concurrency}`
  const queue = new Queue(name, { connection: url })
  await queue.addBulk(Array.from({ length: JOBS }, (_, i) => ({ name: 'j', data: { i } })))
  const work = createWorkerHandler(name, async () => 1, { connection: url, concurrency })
  const t0 = performance.now()
  const result = await work({}, context())
  const took = performance.now() - t0
  await Promise.all([work.close(), queue.close()])
  return { jobsPerS: (result.processed / took) * 1000, processed: result.processed }
}

async function workerRate(concurrency: number) {
  const name = `worker-${concurrency}`
  const queue = new Queue(name, { connection: url })
  await queue.addBulk(Array.from({ length: JOBS }, (_, i) => ({ name: 'j', data: { i } })))
  let done = 0
  const t0 = performance.now()
  const finished = new Promise<void>((resolve) => {
    const worker = new Worker(name, async () => 1, { connection: url, concurrency })
    worker.on('completed', () => {
      if (++done === JOBS) void worker.close().then(resolve)
    })
  })
  await finished
  const took = performance.now() - t0
  await queue.close()
  return (JOBS / took) * 1000
}

// ---- commands and invocations per 10,000 jobs ----------------------------------------------------------
async function perTenThousand() {
  const n = 10_000
  const queue = new Queue('count', { connection: url })
  const work = createWorkerHandler('count', async () => 1, { connection: url, concurrency: 10 })
  let processed = 0
  endpoint.onInvoke(async (call) => {
    const result = await work(call.payload, context())
    processed += result.processed
  })
  const reaper = reaperFor('count', 100, 3)
  await reaper.run() // warm, empty
  const counter = await commandCounter()
  const idle0 = counter.read()
  await reaper.run()
  const idlePass = counter.read() - idle0
  const calls0 = endpoint.calls.length

  const c0 = counter.read()
  await queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'j', data: { i } })))
  const c1 = counter.read()
  let passes = 0
  while (processed < n && passes < 1000) {
    await reaper.run()
    await endpoint.settled()
    passes++
  }
  const c2 = counter.read()
  counter.stop()
  endpoint.onInvoke(undefined)
  await Promise.all([reaper.close(), work.close(), queue.close()])
  return {
    producer: c1 - c0,
    // The reaper's passes (sweep + backlog) and the functions' own commands.
    consumers: c2 - c1,
    passes,
    invocations: endpoint.calls.length - calls0,
    idlePass,
  }
}

try {
  const start = await startLatency()
  const rates = { fn1: await invocationRate(1), fn50: await invocationRate(50), w1: await workerRate(1), w50: await workerRate(50) }
  const count = await perTenThousand()
  const lines = [
    `EchoMQ worker functions, redis ${redis.version}, node ${process.version}, ${JOBS} no-op jobs per rate, ${SAMPLES} start samples; in-process function (no cold start)`,
    '',
    '| measure | value |',
    '| --- | --- |',
    `| start: reaper pass → job running (p50 / p99) | ${ms(start.p50)} / ${ms(start.p99)} |`,
    `| start at the reaper's defaults (a pass a minute; the job waits for it): p50 / p99 | ${atDefaults(0.5, start.p50)} / ${atDefaults(0.99, start.p99)} |`,
    `| one invocation, concurrency 1 | ${rates.fn1.jobsPerS.toFixed(0)} jobs/s |`,
    `| long-running Worker, concurrency 1 | ${rates.w1.toFixed(0)} jobs/s |`,
    `| one invocation, concurrency 50 | ${rates.fn50.jobsPerS.toFixed(0)} jobs/s |`,
    `| long-running Worker, concurrency 50 | ${rates.w50.toFixed(0)} jobs/s |`,
    `| per 10,000 jobs: producer commands (addBulk) | ${count.producer} |`,
    `| per 10,000 jobs: reaper + worker-function commands | ${count.consumers} (${(count.consumers / 10_000).toFixed(2)} per job; ${count.passes} reaper passes) |`,
    `| per 10,000 jobs: worker invocations (jobsPerInvocation 100, maxConcurrency 3) | ${count.invocations} |`,
    `| a reaper pass over the empty queue: commands / invocations | ${count.idlePass} / 0 |`,
  ]
  console.log(lines.join('\n'))
} finally {
  await endpoint.close()
  await redis.stop()
}
