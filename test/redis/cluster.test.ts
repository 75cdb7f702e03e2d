/**
 * EchoMQ on a real three-master Redis Cluster: queues whose hash tags live on different masters, workers
 * on an ioredis Cluster and on redis+cluster:// URLs, a SIGKILLed worker process recovered by two sweeps,
 * and the Lambda handler. No command may ever fail with CROSSSLOT (or any other error).
 */
import { Cluster } from 'ioredis'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { Queue, QueueEvents, sweep, Worker } from '../../lib/index.js'
import { closeConnection, openConnection } from '../../lib/redis/connection.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { startCluster, type TestCluster } from '../helpers/cluster.js'
import { useKeyGuard } from '../helpers/key-guard.js'
import { captureLogs } from '../helpers/log-lines.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { waitFor } from '../helpers/wait.js'
import { spawnWorker, type WorkerProcess } from '../helpers/worker-process.js'

let cluster: TestCluster
let client: Cluster
/** One queue per master, chosen so their hash tags land on three different nodes. */
let queues: string[]
const closers: (() => Promise<unknown>)[] = []
const children: WorkerProcess[] = []
const errors: string[] = []

beforeAll(async () => {
  cluster = await startCluster(3)
  client = cluster.connect()
  queues = await cluster.queuesOnEachMaster('cq')
}, 60_000)
afterAll(async () => {
  await cluster?.stop()
})
beforeEach(() => {
  errors.length = 0
})
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.stop()))
  await Promise.all(closers.splice(0).map((close) => close()))
  vi.restoreAllMocks()
})

const track = <T extends Queue | Worker>(x: T): T => {
  closers.push(() => x.close())
  if (x instanceof Worker) x.on('error', (err: Error) => errors.push(err.message))
  return x
}

describe('cluster layout', () => {
  it('the test queues hash to three different slots owned by three different masters, and every key of a queue shares its slot', async () => {
    expect(queues).toHaveLength(3)
    const slots = await Promise.all(queues.map((q) => cluster.slotOf(queueKeys('emq', q).wait)))
    const owners = await Promise.all(slots.map((s) => cluster.ownerOf(s)))
    expect(new Set(slots).size).toBe(3)
    expect(new Set(owners).size).toBe(3)
    expect(new Set(owners)).toEqual(new Set(cluster.nodes.map((n) => n.port)))
    for (const [i, q] of queues.entries()) {
      const k = queueKeys('emq', q)
      for (const key of [k.wait, k.active, k.stalled, k.delayed, k.completed, k.failed, k.marker, k.meta, k.job('x'), k.lock('x')]) {
        expect(await cluster.slotOf(key)).toBe(slots[i])
      }
    }
  })

  it('a redis+cluster:// URL (one or two seeds) opens an ioredis Cluster that sees all three masters', async () => {
    for (const url of [cluster.url, cluster.singleSeedUrl]) {
      const conn = openConnection(url)
      expect(conn.client).toBeInstanceOf(Cluster)
      await waitFor(async () => (conn.client as Cluster).status === 'ready', { what: `cluster client for ${url}` })
      expect(
        (conn.client as Cluster)
          .nodes('master')
          .map((n) => n.options.port)
          .sort(),
      ).toEqual(cluster.nodes.map((n) => n.port).sort())
      await closeConnection(conn)
    }
  })
})

describe('Queue and Worker on a cluster', () => {
  it('an ioredis Cluster connection: jobs on every master are added, taken, retried once and completed', async () => {
    const prefix = 'c1'
    const seen = new Map<string, number>()
    for (const q of queues) {
      track(
        // direct: on a Redis Cluster (its URL, seeds or client), which is under test
        new Worker(
          q,
          async (job) => {
            const n = (seen.get(`${q}/${job.id}`) ?? 0) + 1
            seen.set(`${q}/${job.id}`, n)
            if (job.id === 'flaky' && n === 1) throw new Error('first try fails')
            return { q, id: job.id }
          },
          { connection: client, prefix, concurrency: 2, lockDuration: 2_000 },
        ),
      )
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      const queue = track(new Queue(q, { connection: client, prefix }))
      for (const id of ['a', 'b', 'flaky']) await queue.add('job', { id }, { jobId: id, attempts: 2 })
    }

    for (const q of queues) {
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      const queue = new Queue(q, { connection: client, prefix })
      await waitFor(async () => (await queue.counts()).completed === 3, { what: `3 completed jobs in ${q}` })
      expect(await queue.counts()).toEqual({ wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 3, failed: 0 })
      expect(await queue.getJob('flaky')).toMatchObject({
        state: 'completed',
        attemptsMade: 2,
        attemptsStarted: 2,
        returnValue: { q, id: 'flaky' },
      })
      // The job really lives on the master that owns the queue's slot.
      const owner = await cluster.ownerOf(await cluster.slotOf(queueKeys(prefix, q).wait))
      const node = cluster.nodes.find((n) => n.port === owner)
      expect(await node?.client.hget(queueKeys(prefix, q).job('a'), 'state')).toBe('completed')
    }
    expect(errors).toEqual([])
  })

  it('redis+cluster:// URLs (one seed and two seeds): add, complete, and close() returning a running job to wait', async () => {
    const prefix = 'c2'
    const [q1, q2, q3] = queues as [string, string, string]
    const results: string[] = []
    for (const q of [q1, q2]) {
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      const w = track(new Worker(q, (job) => results.push(`${q}/${job.id}`), { connection: cluster.url, prefix }))
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      const queue = track(new Queue(q, { connection: cluster.singleSeedUrl, prefix }))
      await queue.add('job', {}, { jobId: 'u1' })
      await waitFor(async () => (await queue.getJob('u1'))?.state === 'completed', { what: `u1 completed in ${q}` })
      await w.close()
    }
    expect(results.sort()).toEqual([`${q1}/u1`, `${q2}/u1`].sort())

    // A job still running when close() times out goes back to wait (the finish script's release path).
    // direct: on a Redis Cluster (its URL, seeds or client), which is under test
    const queue3 = track(new Queue(q3, { connection: cluster.url, prefix }))
    const hung = track(
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      new Worker(q3, (_job, _token, signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))), {
        connection: cluster.singleSeedUrl,
        prefix,
        closeTimeout: 50,
      }),
    )
    await queue3.add('job', {}, { jobId: 'held' })
    await waitFor(async () => (await queue3.getJob('held'))?.state === 'active', { what: 'held to be taken' })
    await hung.close()
    expect(await queue3.getJob('held')).toMatchObject({ state: 'wait', attemptsMade: 0 })
    expect(await queue3.counts()).toMatchObject({ wait: 1, active: 0 })
    expect(errors).toEqual([])
  })
})

describe('crash recovery on a cluster', () => {
  it('worker processes on redis+cluster:// killed with SIGKILL: the first sweep marks, the second recovers, on every master', async () => {
    const prefix = 'c3'
    const workers = await Promise.all(
      queues.map(async (q) => {
        const w = await spawnWorker({
          REDIS_URL: cluster.url,
          QUEUE: q,
          PREFIX: prefix,
          LOCK_MS: '400',
          HEARTBEAT_MS: '100',
          CONCURRENCY: '2',
        })
        children.push(w)
        return w
      }),
    )
    for (const q of queues) {
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      const queue = track(new Queue(q, { connection: client, prefix }))
      for (const id of ['k1', 'k2']) await queue.add('job', {}, { jobId: id })
    }
    await Promise.all(
      workers.map((w) => waitFor(() => ['k1', 'k2'].every((id) => w.active().includes(id)), { what: 'child worker to take k1,k2' })),
    )
    // Heartbeats keep the 400 ms leases alive well past their first deadline.
    const firstDeadline = Number(await client.zscore(queueKeys(prefix, queues[0] as string).active, 'k1'))
    await waitFor(async () => Number(await client.zscore(queueKeys(prefix, queues[0] as string).active, 'k1')) > firstDeadline + 400, {
      what: 'a renewal past the first deadline',
    })

    for (const w of workers) w.kill('SIGKILL')
    await Promise.all(
      queues.map((q) =>
        waitFor(async () => (await client.exists(queueKeys(prefix, q).lock('k1'), queueKeys(prefix, q).lock('k2'))) === 0, {
          what: `leases of ${q} to lapse`,
        }),
      ),
    )

    for (const q of queues) {
      const first = await sweep(cluster.url, q, { prefix, graceMs: 0 })
      const second = await sweep(cluster.singleSeedUrl, q, { prefix, graceMs: 0 })
      expect(first.marked.sort()).toEqual(['k1', 'k2'])
      expect(first.recovered).toEqual([])
      expect(second).toEqual({ marked: [], recovered: expect.arrayContaining(['k1', 'k2']), failed: [] })
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      const queue = new Queue(q, { connection: client, prefix })
      for (const id of ['k1', 'k2'])
        expect(await queue.getJob(id)).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1, attemptsStarted: 1 })
      expect(await queue.counts()).toEqual({ wait: 2, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 0 })
    }
    for (const w of workers) expect(w.messages.filter((m) => m.type === 'error' || m.type === 'lockLost')).toEqual([])
  })
})

describe('the Lambda handler on a cluster', () => {
  const context = { getRemainingTimeInMillis: () => 50_000 }
  let logs: string[]
  beforeEach(() => {
    // The handler's Powertools Logger writes to the streams itself; console.warn is ioredis's.
    logs = captureLogs().text
  })

  it.each([
    ['REDIS_URL=redis+cluster://', 'c4', () => ({ REDIS_URL: cluster.url })],
    [
      'REDIS_CLUSTER=true with a redis:// seed',
      'c5',
      () => ({ REDIS_URL: `redis://127.0.0.1:${cluster.nodes[2]?.port}`, REDIS_CLUSTER: 'true' }),
    ],
  ])('%s: marks every queue on one invocation and recovers on the next, no queue error', async (_label, prefix, redisEnv) => {
    for (const q of queues) {
      const ids = await crashedJobs(client, q, 3, { idPrefix: 'h', prefix, attempts: q === queues[2] ? 1 : 3 })
      // The third queue's jobs stalled once before: this stall is one too many (maxStalledCount 1).
      if (q === queues[2]) for (const id of ids) await client.hset(queueKeys(prefix, q).job(id), 'stalledCounter', '1')
    }
    // No QUEUES: the queues come from the registry key, which lives on a slot of its own.
    const handler = createHandler({ ...redisEnv(), PREFIX: prefix, METRICS_MODE: 'off', IS_LOCAL: 'true', SWEEP_GRACE_MS: '0' })

    const first = await handler({}, context)
    const second = await handler({}, context)

    const [q1, q2, q3] = queues as [string, string, string]
    expect(first).toEqual({
      sweeps: 1,
      queues: {
        [q1]: { marked: 3, recovered: 0, failed: 0 },
        [q2]: { marked: 3, recovered: 0, failed: 0 },
        [q3]: { marked: 3, recovered: 0, failed: 0 },
      },
    })
    expect(second).toEqual({
      sweeps: 1,
      queues: {
        [q1]: { marked: 0, recovered: 3, failed: 0 },
        [q2]: { marked: 0, recovered: 3, failed: 0 },
        [q3]: { marked: 0, recovered: 0, failed: 3 },
      },
    })
    // direct: on a Redis Cluster (its URL, seeds or client), which is under test
    expect(await new Queue(q3, { connection: client, prefix }).counts()).toEqual({
      wait: 0,
      prioritized: 0,
      active: 0,
      stalled: 0,
      delayed: 0,
      completed: 0,
      failed: 3,
    })
    // direct: on a Redis Cluster (its URL, seeds or client), which is under test
    expect(await new Queue(q1, { connection: client, prefix }).getJob('h1')).toMatchObject({
      state: 'wait',
      attemptsMade: 0,
      stalledCounter: 1,
    })
    expect(logs.join('\n')).not.toMatch(/CROSSSLOT|"level":"ERROR"/)
    // A line for each queue in each invocation: every one had its jobs marked, then recovered or failed.
    expect(logs.filter((l) => l.includes('"message":"queue"'))).toHaveLength(6)
  })
})

describe('a job\u2019s whole life on the cluster, every script under the key guard', () => {
  useKeyGuard()

  it('delays, backoff retries, retention trims, the sweep (probe, promote, trim), redrive and removal on every master', async () => {
    for (const q of queues) {
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      const queue = track(new Queue(q, { connection: client, prefix: 'life', defaultJobOptions: { removeOnComplete: { count: 2 } } }))
      const worker = track(
        // direct: on a Redis Cluster (its URL, seeds or client), which is under test
        new Worker(
          q,
          (job) => {
            if (job.name === 'flaky' && job.attemptsStarted === 1) throw new Error('first run fails')
            if (job.name === 'bad') throw new Error('always')
            return 'ok'
          },
          { connection: cluster.url, prefix: 'life', concurrency: 3, lockDuration: 1_000 },
        ),
      )
      await queue.add('later', {}, { jobId: 'd', delay: 200 })
      await queue.add('flaky', {}, { jobId: 'f', attempts: 2, backoff: { type: 'exponential', delay: 50 } })
      await queue.add('bad', {}, { jobId: 'b', attempts: 1 })
      for (let i = 0; i < 14; i++) await queue.add('job', {}, { jobId: `c${i}` })
      await waitFor(async () => (await queue.counts()).failed === 1 && (await queue.counts()).delayed + (await queue.counts()).wait === 0, {
        timeoutMs: 10_000,
        what: `${q}: every job finished`,
      })
      await sweep(client, q, { prefix: 'life', graceMs: 0 })
      expect(await queue.counts()).toMatchObject({ completed: 2, failed: 1, delayed: 0, wait: 0, active: 0 })
      expect(await queue.retryJobs({ ids: ['b'] })).toEqual(['b'])
      await waitFor(async () => (await queue.getJob('b'))?.retried === 1 && (await queue.counts()).failed === 1, { what: `${q}: b again` })
      expect(await queue.remove('b')).toBe(1)
      await worker.close()
    }
    expect(errors).toEqual([])
  })

  it('events, progress and logs, pause, addBulk, drain, clean and obliterate on every master', async () => {
    for (const q of queues) {
      // direct: on a Redis Cluster (its URL, seeds or client), which is under test
      const queue = track(new Queue(q, { connection: client, prefix: 'day' }))
      const events = new QueueEvents(q, { connection: cluster.url, prefix: 'day', blockingTimeout: 200 })
      closers.push(() => events.close())
      await events.waitUntilReady()
      const worker = track(
        // direct: on a Redis Cluster (its URL, seeds or client), which is under test
        new Worker(
          q,
          async (job) => {
            await job.updateProgress(1)
            await job.log('a line')
            return 'ok'
          },
          { connection: cluster.url, prefix: 'day', lockDuration: 1_000 },
        ),
      )
      const [job] = await queue.addBulk([{ name: 'x', data: {}, opts: { priority: 3 } }])
      await expect(job?.waitUntilFinished(events, 5_000)).resolves.toBe('ok')
      const scheduled = await queue.upsertJobScheduler('beat', { every: 100 }, { opts: { removeOnComplete: true } })
      await expect(scheduled?.waitUntilFinished(events, 5_000)).resolves.toBe('ok')
      await sweep(client, q, { prefix: 'day', graceMs: 0 })
      expect(await queue.removeJobScheduler('beat')).toBe(true)
      await queue.rateLimit(1)
      expect(await queue.getJobLogs(job?.id as string)).toEqual({ logs: ['a line'], count: 1 })
      await worker.close()
      await queue.pause()
      await queue.addBulk([
        { name: 'x', data: {} },
        { name: 'x', data: {}, opts: { delay: 60_000 } },
      ])
      await queue.resume()
      await queue.drain(true)
      expect(await queue.clean(0, 0)).toEqual([job?.id])
      await queue.add('x', {})
      await queue.obliterate()
      expect(await queue.counts()).toEqual({ wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 0 })
    }
    expect(errors).toEqual([])
  })
})
