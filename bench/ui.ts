/**
 * The dashboard on big queues, timed from outside: `npx tsx bench/ui.ts [--jobs 100000] [--queues 300]
 * [--runs 20]`, by hand (not part of `npm run bench`). On a private redis-server it keeps `--jobs` failed
 * and `--jobs` completed jobs in one queue (removeOnFail / removeOnComplete: false, finished by real
 * workers), plus 10,000 waiting, 10,000 delayed and 200 in flight (a dead worker's, half of them marked
 * by a sweep), and `--queues` small queues beside it; then serves the dashboard (serveDashboard) and
 * GETs each page `--runs` times with fetch, printing the median, p95 and slowest time of each and the
 * commands the dashboard's client sent for one request (counted on the client: a script call once).
 */
import { parseArgs } from 'node:util'
import { Redis } from 'ioredis'
import { addJobs, buildCrashedState as crashedJobs, holdJobs } from '../cli/support/crashed-state.js'
import { startLocalRedis } from '../cli/support/local-redis.js'
import { Queue, sweep, Worker } from '../lib/index.js'
import { serveDashboard } from '../lib/ui/index.js'
import { median, quantile } from './util.js'

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '100000' },
    queues: { type: 'string', default: '300' },
    runs: { type: 'string', default: '20' },
  },
})
const JOBS = Number(values.jobs)
const QUEUES = Number(values.queues)
const RUNS = Number(values.runs)
const BULK = 1_000
const log = (message: string) => process.stderr.write(`${message}\n`)

async function finish(url: string, queue: Queue, n: number, fail: boolean): Promise<void> {
  for (let i = 0; i < n; i += BULK) {
    const size = Math.min(BULK, n - i)
    const opts = { attempts: 1, removeOnFail: false, removeOnComplete: false }
    await queue.addBulk(Array.from({ length: size }, (_, j) => ({ name: fail ? 'charge' : 'send', data: { n: i + j }, opts })))
  }
  const worker = new Worker(
    queue.name,
    (job) => {
      if (fail) throw new Error(`card declined for job ${job.id}`)
      return { ok: true }
    },
    { connection: url, concurrency: 100, name: fail ? 'billing-1' : 'mailer-1' },
  )
  const target = fail ? 'failed' : 'completed'
  for (;;) {
    const counts = await queue.counts()
    if (counts[target] >= n) break
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  await worker.close()
}

async function main(): Promise<void> {
  const redis = await startLocalRedis()
  const admin = new Redis(redis.url)
  try {
    const t0 = performance.now()
    const big = new Queue('big', { connection: redis.url })
    await finish(redis.url, big, JOBS, true)
    await finish(redis.url, big, JOBS, false)
    await crashedJobs(admin, 'big', 200)
    await sweep(admin, 'big', { graceMs: 60_000, limit: 100 })
    // Beside the marked ones, a second dead worker's jobs, not yet swept.
    await addJobs(
      admin,
      'big',
      Array.from({ length: 100 }, (_, i) => `late-${i}`),
    )
    await holdJobs(admin, 'big', 100, { leaseMs: 1, workerName: 'dead-2' })
    await big.pause()
    for (let i = 0; i < 10_000; i += BULK) {
      await big.addBulk(Array.from({ length: BULK }, (_, j) => ({ name: 'later', data: { i: i + j }, opts: { delay: 3_600_000 + j } })))
      await big.addBulk(Array.from({ length: BULK }, (_, j) => ({ name: 'next', data: { i: i + j } })))
    }
    for (let q = 0; q < QUEUES; q++) {
      const small = new Queue(`q${String(q).padStart(3, '0')}`, { connection: admin })
      await small.addBulk(Array.from({ length: 5 }, (_, j) => ({ name: 'x', data: { j } })))
      await small.close()
    }
    log(`seeded in ${Math.round(performance.now() - t0)} ms: ${JSON.stringify(await big.counts())} and ${QUEUES} small queues`)

    const client = new Redis(redis.url)
    const sent: string[] = []
    const send = client.sendCommand.bind(client)
    client.sendCommand = ((command: { name: string }) => {
      sent.push(command.name)
      return send(command as never)
    }) as typeof client.sendCommand
    const served = await serveDashboard({ connection: client, port: 0, refreshMs: 0 })
    const failedId = (await big.getJobs('failed', { start: 0, end: 0 }))[0]?.id
    const lastPage = Math.ceil(JOBS / 50)
    const pages: [string, string, Record<string, string>?][] = [
      [`overview (${QUEUES + 1} queues)`, ''],
      ['failed, page 1', 'queues/big?state=failed'],
      [`failed, page ${lastPage / 2}`, `queues/big?state=failed&page=${lastPage / 2}`],
      [`failed, page ${lastPage} (last)`, `queues/big?state=failed&page=${lastPage}`],
      ['completed, page 1', 'queues/big?state=completed'],
      [`completed, page ${lastPage} (last)`, `queues/big?state=completed&page=${lastPage}`],
      ['waiting (paused), page 1', 'queues/big?state=wait'],
      ['waiting, page 100', 'queues/big?state=wait&page=100'],
      ['delayed, page 1', 'queues/big?state=delayed'],
      ['in flight, by worker', 'queues/big?state=active'],
      ['a failed job', `queues/big/jobs/${failedId}`],
      ['failed, page 1, live JSON', 'queues/big?state=failed', { accept: 'application/json' }],
      [`overview, live JSON`, '', { accept: 'application/json' }],
    ]
    const rows: string[] = []
    for (const [label, path, headers] of pages) {
      const times: number[] = []
      let commands = 0
      for (let i = 0; i < RUNS + 1; i++) {
        sent.length = 0
        const t = performance.now()
        const res = await fetch(served.url + path, { headers: headers ?? {} })
        await res.text()
        if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status}`)
        if (i > 0) times.push(performance.now() - t) // the first opens the queue (a registry check): warm-up
        commands = sent.length
      }
      const ms = (v: number) => v.toFixed(1).padStart(7)
      rows.push(
        `${label.padEnd(34)} ${ms(median(times))} ${ms(quantile(times, 0.95))} ${ms(Math.max(...times))} ${String(commands).padStart(9)}`,
      )
    }
    const head = `${'page'.padEnd(34)} ${'median'.padStart(7)} ${'p95'.padStart(7)} ${'max'.padStart(7)} ${'commands'.padStart(9)}`
    console.log(`dashboard on ${JOBS} failed + ${JOBS} completed kept, ${RUNS} GETs per page, ms (fetch, end to end)\n${head}`)
    console.log(rows.join('\n'))
    await served.close()
    client.disconnect()
    await big.close()
  } finally {
    admin.disconnect()
    await redis.stop()
  }
}

await main()
