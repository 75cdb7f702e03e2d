/** Real worker processes killed with SIGKILL and paused with SIGSTOP, swept by the two-phase sweep. */
import { expect, it } from 'vitest'
import { sweep } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { useWorkerProcesses, type WorkerProcess } from '../helpers/worker-process.js'

const redis = useRedis()
const fx = useQueue(redis)
const spawnWorker = useWorkerProcesses()
const { keys } = fx

async function workerHolding(ids: string[], attempts = 3, env: Record<string, string> = {}): Promise<WorkerProcess> {
  const w = await spawnWorker({
    REDIS_URL: redis.url,
    QUEUE: 'q',
    LOCK_MS: '400',
    HEARTBEAT_MS: '100',
    CONCURRENCY: String(ids.length),
    ...env,
  })
  for (const id of ids) await fx.queue.add('job', { id }, { jobId: id, attempts })
  await waitFor(() => ids.every((id) => w.active().includes(id)), { what: `worker to take ${ids.join(',')}` })
  return w
}

const leaseGone = (id: string) => waitFor(async () => (await redis.client.exists(keys.lock(id))) === 0, { what: `lease of ${id} to lapse` })

it('a worker killed with SIGKILL has its jobs marked by the first sweep and recovered by the second, a stall counted (no attempt)', async () => {
  const w = await workerHolding(['k1', 'k2'])

  w.kill('SIGKILL')
  await Promise.all(['k1', 'k2'].map(leaseGone))
  const first = await sweep(redis.url, 'q', { graceMs: 0 })
  const second = await sweep(redis.url, 'q', { graceMs: 0 })

  expect(first.marked.sort()).toEqual(['k1', 'k2'])
  expect(first.recovered).toEqual([])
  expect(second.recovered.sort()).toEqual(['k1', 'k2'])
  for (const id of ['k1', 'k2'])
    expect(await fx.queue.getJob(id)).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1, attemptsStarted: 1 })
  expect((await redis.client.lrange(keys.wait, 0, -1)).sort()).toEqual(['k1', 'k2'])
})

it('a worker paused with SIGSTOP past its lease and resumed before the second sweep keeps its job and completes it', async () => {
  const w = await workerHolding(['p1'])

  w.kill('SIGSTOP')
  await leaseGone('p1')
  const first = await sweep(redis.url, 'q', { graceMs: 0 })
  w.kill('SIGCONT')
  await waitFor(async () => (await redis.client.zscore(keys.stalled, 'p1')) === null, { what: 'renewal to clear the mark' })
  const second = await sweep(redis.url, 'q', { graceMs: 0 })
  w.finish('p1')
  await w.waitForMessage('completed', 'p1')

  expect(first.marked).toEqual(['p1'])
  expect(second).toEqual({ marked: [], recovered: [], failed: [] })
  expect(w.messages.some((m) => m.type === 'lockLost')).toBe(false)
  expect(await fx.queue.getJob('p1')).toMatchObject({ state: 'completed', attemptsMade: 1, attemptsStarted: 1 })
})

it("a killed worker's job past its stall allowance (a worker's maxStalledCount 0) lands in failed", async () => {
  const w = await workerHolding(['last'], 1, { MAX_STALLED_COUNT: '0' })
  await waitFor(async () => (await redis.client.hget(keys.meta, 'maxStalledCount')) === '0', { what: 'the allowance in meta' })

  w.kill('SIGKILL')
  await leaseGone('last')
  await sweep(redis.url, 'q', { graceMs: 0 })
  const second = await sweep(redis.url, 'q', { graceMs: 0 })

  expect(second.failed).toEqual(['last'])
  const job = await fx.queue.getJob('last')
  expect(job).toMatchObject({ state: 'failed', attemptsMade: 0, stalledCounter: 1 })
  expect(job?.failedReason).toBe('job stalled more than allowable limit')
  expect(await fx.queue.counts()).toEqual({ wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 1 })
})

it('a recovered job is taken again by a healthy worker and completed', async () => {
  const dead = await workerHolding(['again'])
  dead.kill('SIGKILL')
  await leaseGone('again')
  await sweep(redis.url, 'q', { graceMs: 0 })
  await sweep(redis.url, 'q', { graceMs: 0 })

  const healthy = await spawnWorker({ REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '400', HEARTBEAT_MS: '100' })
  await healthy.waitForMessage('active', 'again')
  healthy.finish('again')
  await healthy.waitForMessage('completed', 'again')

  expect(await fx.queue.getJob('again')).toMatchObject({ state: 'completed', attemptsMade: 1, stalledCounter: 1, attemptsStarted: 2 })
})
