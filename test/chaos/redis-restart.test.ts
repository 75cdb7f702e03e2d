/**
 * Redis restarts: a redis-server with `--appendonly yes --appendfsync always` is stopped (SHUTDOWN, SIGTERM,
 * and SIGKILL, which loses nothing acknowledged with fsync on every write) and started again on the same
 * port and dir, several times, while producers add jobs, workers process them and a sweeper loop runs.
 * Everyone reconnects and carries on; every job whose add() resolved ends completed.
 */
import { Redis } from 'ioredis'
import { afterAll, expect, it } from 'vitest'
import { type Job, Queue, sweep, Worker } from '../../lib/index.js'
import { fieldsFromHash } from '../../lib/job.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { waitFor } from '../helpers/wait.js'
import { FULL, pause, rng, sizes } from './config.js'
import { type DurableRedis, type StopHow, startDurableRedis } from './durable-redis.js'

const QUEUE = 'restart'
const keys = queueKeys('emq', QUEUE)
let redis: DurableRedis | undefined
const cleanup: (() => Promise<unknown>)[] = []

afterAll(async () => {
  for (const fn of cleanup.reverse()) await fn().catch(() => undefined)
  await redis?.destroy()
})

it(`${sizes.restartJobs} jobs added while redis-server is restarted ${sizes.restarts} times: no acknowledged job is lost`, {
  timeout: FULL ? 300_000 : 90_000,
}, async () => {
  const r = rng()
  const t0 = Date.now()
  const server = await startDurableRedis()
  redis = server
  const N = sizes.restartJobs
  const productionMs = FULL ? 12_000 : 3_000

  // Workers: in-process, default reconnecting connections from the URL.
  const executions = new Map<string, number>()
  const completedEvents = new Map<string, number>()
  const stats = { workerErrors: 0, lockLost: 0, failedEvents: 0 }
  const processor = async (job: Job, _token: string, signal: AbortSignal) => {
    executions.set(job.id, (executions.get(job.id) ?? 0) + 1)
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 2 + Math.random() * 18)
      signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer)
          reject(signal.reason)
        },
        { once: true },
      )
    })
    return { n: job.attemptsStarted }
  }
  const workers = [0, 1].map(() => {
    // direct: on a server this test kills and restarts, not the fixture's Redis
    const w = new Worker(QUEUE, processor, {
      connection: server.url,
      concurrency: 4,
      lockDuration: 1_000,
      heartbeatInterval: 200,
      closeTimeout: 500,
    })
    w.on('error', () => stats.workerErrors++)
    w.on('lockLost', () => stats.lockLost++)
    w.on('failed', () => stats.failedEvents++)
    w.on('completed', (job: Job) => completedEvents.set(job.id, (completedEvents.get(job.id) ?? 0) + 1))
    cleanup.push(() => w.close())
    return w
  })

  // A sweeper loop on its own reconnecting client.
  const sweeps = { calls: 0, errors: 0, recovered: 0, failed: 0 }
  const sweepClient = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 100 })
  sweepClient.on('error', () => undefined)
  cleanup.push(async () => sweepClient.disconnect())
  let sweeping = true
  const sweeper = (async () => {
    while (sweeping) {
      try {
        const res = await sweep(sweepClient, QUEUE, { graceMs: 200 })
        sweeps.calls++
        sweeps.recovered += res.recovered.length
        sweeps.failed += res.failed.length
      } catch {
        sweeps.errors++
      }
      await pause(150)
    }
  })()

  // Two producers, paced over productionMs; an id counts as acknowledged once add() resolved.
  // Every completed job is kept: the run reads each job's hash at the end to prove none was lost.
  // direct: on a server this test kills and restarts, not the fixture's Redis
  const queue = new Queue(QUEUE, { connection: server.url, defaultJobOptions: { removeOnComplete: false } })
  cleanup.push(() => queue.close())
  const attempted: string[] = []
  const acked = new Set<string>()
  const addErrors: string[] = []
  const perProducer = Math.ceil(N / 2)
  const producers = [0, 1].map(async (p) => {
    for (let i = 0; i < perProducer && p * perProducer + i < N; i++) {
      const id = `p${p}-${i}`
      attempted.push(id)
      try {
        await queue.add('work', { p, i }, { jobId: id, attempts: 5 })
        acked.add(id)
      } catch (err) {
        addErrors.push(`${id}: ${(err as Error).message}`)
      }
      await pause(productionMs / perProducer)
    }
  })

  // Restarts spread over the production (restart k once (k+1)/(R+1) of the jobs are acknowledged, so adds
  // go on before and after each one), rotating how the server goes down.
  const hows: StopHow[] = ['SHUTDOWN', 'SIGTERM', 'SIGKILL']
  const restarts: { how: StopHow; downMs: number; ackedBefore: number }[] = []
  for (let k = 0; k < sizes.restarts; k++) {
    const threshold = Math.floor((N * (k + 1)) / (sizes.restarts + 1))
    await waitFor(() => acked.size >= threshold, { timeoutMs: 60_000, what: `${threshold} acknowledged adds before restart ${k + 1}` })
    const how = hows[k % hows.length] as StopHow
    const ackedBefore = acked.size
    const down = Date.now()
    await server.stop(how)
    await pause(r.int(100, 1_500)) // stays down a while, sometimes past the 1 s leases
    await server.start()
    restarts.push({ how, downMs: Date.now() - down, ackedBefore })
  }
  await Promise.all(producers)

  // Every acknowledged job ends completed (polled with a deadline).
  const check = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 })
  check.on('error', () => undefined)
  cleanup.push(async () => check.disconnect())
  const states = async (ids: string[]) => {
    const out = new Map<string, Record<string, string>>()
    for (let i = 0; i < ids.length; i += 500) {
      const batch = ids.slice(i, i + 500)
      const replies = (await batch.reduce((pl, id) => pl.hgetall(keys.job(id)), check.pipeline()).exec()) ?? []
      for (const [k, id] of batch.entries()) out.set(id, (replies[k]?.[1] ?? {}) as Record<string, string>)
    }
    return out
  }
  const existing = (m: Map<string, Record<string, string>>) => [...m].filter(([, h]) => h.state !== undefined)
  await waitFor(async () => existing(await states(attempted)).every(([, h]) => h.state === 'completed' || h.state === 'failed'), {
    timeoutMs: 60_000,
    intervalMs: 100,
    what: 'every stored job to finish',
  }).catch((err: Error) => console.log(`[chaos] redis-restart: ${err.message}`))
  sweeping = false
  await sweeper
  await Promise.all(workers.map((w) => w.close()))

  const final = await states(attempted)
  const completedSet = new Set(await check.zrange(keys.completed, '0', '-1'))
  const counts = {
    wait: await check.llen(keys.wait),
    active: await check.zcard(keys.active),
    stalled: await check.zcard(keys.stalled),
  }
  const lostAcked = [...acked].filter((id) => final.get(id)?.state === undefined)
  const notCompleted = existing(final)
    .filter(([id, h]) => h.state !== 'completed' || !completedSet.has(id))
    .map(([id, h]) => `${id}:${h.state}`)
  const badData = [...acked].filter((id) => {
    const [p, i] = id.slice(1).split('-').map(Number)
    return final.get(id)?.data !== JSON.stringify({ p, i })
  })
  const badReturn = existing(final)
    .filter(([id, h]) => h.state === 'completed' && JSON.parse(h.returnValue ?? 'null')?.n !== fieldsFromHash(id, h).attemptsStarted)
    .map(([id]) => id)
  const multiCompleted = [...completedEvents].filter(([, n]) => n > 1).map(([id]) => id)
  const summary = {
    seed: r.seed,
    runMs: Date.now() - t0,
    attempted: attempted.length,
    acked: acked.size,
    addErrors: addErrors.length,
    storedUnacked: existing(final).filter(([id]) => !acked.has(id)).length,
    restarts: restarts.map((x) => `${x.how}:${x.downMs}ms`).join(','),
    completed: completedSet.size,
    executions: [...executions.values()].reduce((a, b) => a + b, 0),
    reRuns: [...executions.values()].reduce((a, b) => a + b, 0) - executions.size,
    completedEvents: [...completedEvents.values()].reduce((a, b) => a + b, 0),
    recoveries: sweeps.recovered,
    sweepErrors: sweeps.errors,
    workerErrors: stats.workerErrors,
    lockLost: stats.lockLost,
    failedEvents: stats.failedEvents,
    lostAcked: lostAcked.length,
    notCompleted: notCompleted.length,
  }
  console.log(`[chaos] redis-restart: ${JSON.stringify(summary)}`)
  if (addErrors.length > 0) console.log(`[chaos] redis-restart add errors (first 5): ${addErrors.slice(0, 5).join(' | ')}`)

  expect(restarts).toHaveLength(sizes.restarts)
  expect(acked.size).toBeGreaterThan(restarts.at(-1)?.ackedBefore ?? N) // adds went on after the last restart
  expect(lostAcked).toEqual([])
  expect(notCompleted).toEqual([])
  expect(badData).toEqual([])
  expect(badReturn).toEqual([])
  expect(multiCompleted).toEqual([])
  expect(acked.size).toBeGreaterThan(N / 2)
  expect(counts).toEqual({ wait: 0, active: 0, stalled: 0 })
})
