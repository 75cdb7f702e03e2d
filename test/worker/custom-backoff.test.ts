/**
 * Custom backoff as BullMQ's: a job's `backoff: { type: 'custom' }` (or any name that is not fixed or
 * exponential) waits what the worker's settings.backoffStrategy(attemptsMade, type, err, job) returns, in
 * ms; -1 fails the job instead of retrying. Built-in types never call it.
 */
import { expect, it } from 'vitest'
import type { Job } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, skipStalledCheck: true } })
const boom = () => {
  throw new Error('gateway down')
}

it('type "custom": the retry waits what backoffStrategy returns, called with BullMQ\u2019s arguments', async () => {
  const calls: [number, string, string, string][] = []
  const w = fx.worker(boom, {
    settings: {
      backoffStrategy: (attemptsMade, type, err, job) => {
        calls.push([attemptsMade, type, (err as Error).message, (job as Job).id])
        return 700 * attemptsMade
      },
    },
  })
  const job = await fx.queue.add('call', {}, { jobId: 'b1', attempts: 3, backoff: { type: 'custom' } })
  await nextEvent(w, 'failed')

  const stored = await fx.queue.getJob('b1')
  expect(calls).toEqual([[1, 'custom', 'gateway down', 'b1']])
  expect(stored).toMatchObject({ state: 'delayed', attemptsMade: 1 })
  const [s, us] = await redis.client.time()
  const wait = (stored?.dueAt as number) - (Number(s) * 1000 + Number(us) / 1000)
  expect(wait).toBeGreaterThan(500)
  expect(wait).toBeLessThanOrEqual(750)
  expect(job.id).toBe('b1')
  expect(stored?.opts?.backoff).toMatchObject({ type: 'custom' })
})

it('a strategy returning -1 fails the job with attempts left; fixed and exponential never call it; other names do', async () => {
  const types: string[] = []
  fx.worker(boom, {
    settings: {
      backoffStrategy: (_made, type) => {
        types.push(type)
        return type === 'give-up' ? -1 : 0
      },
    },
  })
  await fx.queue.add('call', {}, { jobId: 'g1', attempts: 5, backoff: { type: 'give-up' } })
  await fx.queue.add('call', {}, { jobId: 'f1', attempts: 2, backoff: { type: 'fixed', delay: 10 } })
  await waitFor(async () => (await fx.queue.getJob('g1'))?.state === 'failed', { what: 'g1 failed' })
  await waitFor(async () => (await fx.queue.getJob('f1'))?.state === 'failed', { what: 'f1 failed after its retry' })

  expect(await fx.queue.getJob('g1')).toMatchObject({ state: 'failed', attemptsMade: 1, failedReason: 'gateway down' })
  expect(await fx.queue.getJob('f1')).toMatchObject({ attemptsMade: 2 })
  expect(types).toEqual(['give-up'])
})

it('refuses a backoffStrategy that is not a function, and a backoff type that is not a name, before any Redis call', async () => {
  expect(() => fx.worker(boom, { settings: { backoffStrategy: 5 as never } })).toThrow(expect.objectContaining({ code: 'ERR_OPTIONS' }))
  await expect(fx.queue.add('x', {}, { backoff: { type: 'a,b' } })).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  expect(await fx.queue.count()).toBe(0)
})
