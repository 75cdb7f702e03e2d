/**
 * Attempts and stalls counted apart, as BullMQ counts them: a job added without `attempts` runs once on
 * failure (BullMQ's default 1), yet a crashed worker's job is recovered (maxStalledCount, default 1), and
 * the next stall fails it with BullMQ's reason. Real worker processes killed with SIGKILL.
 */
import { expect, it } from 'vitest'
import { sweep, Worker } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'
import { useWorkerProcesses } from '../helpers/worker-process.js'

const redis = useRedis()
const fx = useQueue(redis, { close: (w) => w.close(true) })
const spawnWorker = useWorkerProcesses()
const { keys } = fx

/** A worker process that takes `id` (added once) and is then killed; resolves once its lease has lapsed. */
async function crashWhileHolding(id: string, env: Record<string, string> = {}): Promise<void> {
  const w = await spawnWorker({ REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '300', HEARTBEAT_MS: '100', SKIP_STALLED_CHECK: '1', ...env })
  await waitFor(() => w.active().includes(id), { what: `a worker process to take ${id}` })
  await w.stop()
  await waitFor(async () => (await redis.client.exists(keys.lock(id))) === 0, { what: `the lease of ${id} to lapse` })
}

/** Two passes of the sweep (mark, then recover), as the reaper's or a worker's would make them. */
async function sweepTwice() {
  await sweep(redis.url, 'q', { graceMs: 0 })
  return sweep(redis.url, 'q', { graceMs: 0 })
}

it('a job added without attempts is not retried after a failure (BullMQ: attempts 1)', async () => {
  const w = fx.worker(
    () => {
      throw new Error('card declined')
    },
    { skipStalledCheck: true },
  )
  const runs: number[] = []
  w.on('active', (job) => runs.push(job.attemptsStarted))
  const [job] = await Promise.all([nextEvent(w, 'failed'), fx.queue.add('charge', {}, { jobId: 'c1' })])

  expect((job[0] as { state: string }).state).toBe('failed')
  expect(await fx.queue.getJob('c1')).toMatchObject({ state: 'failed', attemptsMade: 1, failedReason: 'card declined' })
  expect(runs).toHaveLength(1)
  expect(await redis.client.hexists(keys.job('c1'), 'attempts')).toBe(0) // the default costs no byte
})

it('a crashed worker\u2019s job is recovered once without using an attempt; the next stall fails it (maxStalledCount 1)', async () => {
  await fx.queue.add('mail', {}, { jobId: 's1' })
  expect(await redis.client.hexists(keys.job('s1'), 'stalledCounter')).toBe(0) // no byte until a stall

  await crashWhileHolding('s1')
  const first = await sweepTwice()
  expect(first.recovered).toEqual(['s1'])
  expect(await fx.queue.getJob('s1')).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1, attemptsStarted: 1 })

  await crashWhileHolding('s1')
  const second = await sweepTwice()
  expect(second.failed).toEqual(['s1'])
  expect(await fx.queue.getJob('s1')).toMatchObject({
    state: 'failed',
    stalledCounter: 2,
    failedReason: 'job stalled more than allowable limit',
  })
})

it('a worker\u2019s maxStalledCount reaches every sweep through the queue\u2019s meta, written only when not the default', async () => {
  const plain = fx.worker(() => 'ok', { skipStalledCheck: true })
  await plain.waitUntilReady()
  expect(await redis.client.hexists(keys.meta, 'maxStalledCount')).toBe(0)

  const allowing = fx.worker(() => 'ok', { maxStalledCount: 2, skipStalledCheck: true })
  await waitFor(async () => (await redis.client.hget(keys.meta, 'maxStalledCount')) === '2', { what: 'maxStalledCount in meta' })
  await Promise.all([plain.close(), allowing.close()])

  await fx.queue.add('mail', {}, { jobId: 'm2' })
  for (let stall = 1; stall <= 2; stall++) {
    await crashWhileHolding('m2')
    expect((await sweepTwice()).recovered).toEqual(['m2'])
  }
  await crashWhileHolding('m2')
  expect((await sweepTwice()).failed).toEqual(['m2'])
  expect(await fx.queue.getJob('m2')).toMatchObject({ state: 'failed', stalledCounter: 3, attemptsMade: 0 })
})

it('maxStalledCount 0 fails a stalled job at its first stall; a bad value is refused before any Redis call', async () => {
  // direct: the constructor's own validation is under test
  expect(() => new Worker('q', () => 'ok', { connection: redis.url, maxStalledCount: -1 })).toThrow(
    expect.objectContaining({ code: 'ERR_OPTIONS' }),
  )
  // direct: the constructor's own validation is under test
  expect(() => new Worker('q', () => 'ok', { connection: redis.url, stalledInterval: 0 })).toThrow(
    expect.objectContaining({ code: 'ERR_OPTIONS' }),
  )
  const zero = fx.worker(() => 'ok', { maxStalledCount: 0, skipStalledCheck: true })
  await waitFor(async () => (await redis.client.hget(keys.meta, 'maxStalledCount')) === '0', { what: 'maxStalledCount 0 in meta' })
  await zero.close()

  await fx.queue.add('mail', {}, { jobId: 'z0', deduplication: { id: 'mail-z0' } })
  await crashWhileHolding('z0')
  expect(await fx.queue.getDeduplicationJobId('mail-z0')).toBe('z0')
  expect((await sweepTwice()).failed).toEqual(['z0'])
  // Failed for good by the sweep, as by a final error: its deduplication id (no ttl) is released, its hold gone.
  expect(await fx.queue.getDeduplicationJobId('mail-z0')).toBeNull()
  expect(await redis.client.hget(keys.meta, 'de:mail-z0')).toBeNull()
})

it('a worker tells of a job its stalled sweep failed and its removeOnFail removed at once, as it was: name, data, stalls', async () => {
  const zero = fx.worker(() => 'ok', { maxStalledCount: 0, skipStalledCheck: true })
  await waitFor(async () => (await redis.client.hget(keys.meta, 'maxStalledCount')) === '0', { what: 'maxStalledCount 0 in meta' })
  await zero.close()
  await fx.queue.add('mail', { to: 'a@b.c' }, { jobId: 'r1', removeOnFail: true })
  await crashWhileHolding('r1')
  const w = fx.worker(() => 'ok', { maxStalledCount: 0, stalledInterval: 100 })
  const [job, err] = await nextEvent<[{ id: string; name: string; data: unknown; stalledCounter: number; state: string }, Error]>(
    w,
    'failed',
  )
  expect(job).toMatchObject({ id: 'r1', name: 'mail', data: { to: 'a@b.c' }, stalledCounter: 1, state: 'failed' })
  expect(err.message).toBe('job stalled more than allowable limit')
  expect(await fx.queue.getJob('r1')).toBeUndefined()
})
