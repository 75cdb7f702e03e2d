/**
 * A BullMQ program has no reaper: its workers sweep for stalled jobs themselves, every stalledInterval,
 * one worker of the queue per interval (the `stalled-check` key, set with PX). A crashed worker's job is
 * recovered with no reaper and no sweep() call. skipStalledCheck leaves the sweeping to the reaper.
 */
import { afterEach, expect, it } from 'vitest'
import { Worker } from '../../lib/index.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'
import { spawnWorker, type WorkerProcess } from '../helpers/worker-process.js'

const redis = useRedis()
const fx = useQueue(redis, { close: (w) => w.close(true) })
const workers: Worker[] = []
const children: WorkerProcess[] = []
const { keys } = fx

afterEach(async () => {
  await Promise.all([...children.splice(0).map((c) => c.stop()), ...workers.splice(0).map((w) => w.close(true))])
})

async function crashed(id: string): Promise<void> {
  const w = await spawnWorker({ REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '300', HEARTBEAT_MS: '100', SKIP_STALLED_CHECK: '1' })
  children.push(w)
  await fx.queue.add('job', {}, { jobId: id })
  await waitFor(() => w.active().includes(id), { what: `the process to take ${id}` })
  await w.stop()
}

const commandCalls = async (name: string): Promise<number> => {
  const stats = await redis.client.info('commandstats')
  return Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
}

it('a live worker recovers a crashed worker\u2019s job by itself, every stalledInterval, and runs it', async () => {
  await crashed('c1')
  const w = fx.worker(() => 'recovered', { stalledInterval: 150, lockDuration: 1_000 })

  const [stalledId] = await nextEvent<[string]>(w, 'stalled')
  await waitFor(async () => (await fx.queue.getJob('c1'))?.state === 'completed', { what: 'c1 run by the live worker' })

  expect(stalledId).toBe('c1')
  expect(await fx.queue.getJob('c1')).toMatchObject({ attemptsMade: 1, stalledCounter: 1, returnValue: 'recovered' })
})

it('one worker of the queue sweeps per interval: the stalled-check key is set with PX stalledInterval', async () => {
  const intervalMs = 200
  for (let i = 0; i < 2; i++) {
    const w = fx.worker(() => 'ok', { stalledInterval: intervalMs })
    await w.waitUntilReady()
  }
  await waitFor(async () => (await redis.client.exists(keys.stalledCheck)) === 1, { what: 'the stalled-check key' })
  const ttl = await redis.client.pttl(keys.stalledCheck)
  expect(ttl).toBeGreaterThan(0)
  expect(ttl).toBeLessThanOrEqual(intervalMs)

  await redis.client.config('RESETSTAT')
  const t0 = performance.now()
  await waitFor(() => performance.now() - t0 > 10 * intervalMs, { intervalMs: 50, what: 'ten intervals' })
  const [sets, scripts] = await Promise.all([commandCalls('set'), commandCalls('evalsha')])
  // Each worker claims once per interval; only the winner runs the sweep's probe (one script on an idle queue).
  // The lower bounds leave room for timers a loaded machine fires late (7 of 10 seen with a second suite running).
  expect(sets).toBeGreaterThanOrEqual(2 * 6)
  expect(sets).toBeLessThanOrEqual(2 * 12)
  expect(scripts).toBeGreaterThanOrEqual(6)
  expect(scripts).toBeLessThanOrEqual(12)
})

it('skipStalledCheck: the worker never sweeps (the reaper does); close() leaves no sweep timer behind', async () => {
  await crashed('k1')
  fx.worker(() => 'ok', { skipStalledCheck: true })
  // direct: a worker of a second queue, which the fixture does not make
  const sweeping = new Worker('other', () => 'ok', { connection: redis.url, stalledInterval: 100 })
  workers.push(sweeping)
  const otherCheck = queueKeys('emq', 'other').stalledCheck
  await waitFor(async () => (await redis.client.exists(otherCheck)) === 1, { what: 'the other queue swept' })
  await sweeping.close()
  await redis.client.del(otherCheck)

  const t0 = performance.now()
  await waitFor(() => performance.now() - t0 > 1_000, { intervalMs: 50, what: 'past the lease and several intervals' })
  expect(await redis.client.exists(keys.stalledCheck)).toBe(0)
  expect(await redis.client.exists(otherCheck)).toBe(0) // no timer left by close()
  expect(await fx.queue.getJob('k1')).toMatchObject({ state: 'active' })
})
