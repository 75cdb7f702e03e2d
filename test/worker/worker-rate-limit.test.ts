/**
 * BullMQ's pattern for a 429: `await worker.rateLimit(ms); throw Worker.RateLimitError()`. The job goes back
 * to the line without using an attempt, every worker of the queue holds off for ms, and
 * queue.getRateLimitTtl() answers the time left, for a hold and for a worker limiter's full window.
 */
import { expect, it } from 'vitest'
import { Worker } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, skipStalledCheck: true } })

it('worker.rateLimit(ms) then Worker.RateLimitError(): back in line with no attempt used, every worker held for ms', async () => {
  const starts: number[] = []
  let ttlSeen = -3
  const w = fx.worker(async () => {
    starts.push(performance.now())
    if (starts.length === 1) {
      await w.rateLimit(600)
      ttlSeen = await fx.queue.getRateLimitTtl()
      throw Worker.RateLimitError()
    }
    return 'sent'
  })
  await fx.queue.add('call-api', {}, { jobId: 'api' })
  await waitFor(async () => (await fx.queue.getJob('api'))?.state === 'completed', { what: 'the job done after the hold' })

  expect(ttlSeen).toBeGreaterThan(400)
  expect(ttlSeen).toBeLessThanOrEqual(600)
  expect((starts[1] as number) - (starts[0] as number)).toBeGreaterThanOrEqual(550)
  expect(await fx.queue.getJob('api')).toMatchObject({ attemptsMade: 1, attemptsStarted: 2 })
  expect(await fx.queue.getRateLimitTtl()).toBe(-2)
  await expect(w.rateLimit(-5)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
})

it('after a run limited by the worker limiter, getRateLimitTtl answers the window\u2019s time left (maxJobs: only when full)', async () => {
  fx.worker(() => 'ok', { limiter: { max: 2, duration: 2_000 } })
  for (const id of ['l1', 'l2', 'l3']) await fx.queue.add('job', {}, { jobId: id })
  await waitFor(async () => (await fx.queue.getJob('l2'))?.state === 'completed', { what: 'two jobs run' })

  const ttl = await fx.queue.getRateLimitTtl()
  expect(ttl).toBeGreaterThan(1_000)
  expect(ttl).toBeLessThanOrEqual(2_000)
  expect(await fx.queue.getRateLimitTtl(2)).toBeGreaterThan(1_000)
  expect(await fx.queue.getRateLimitTtl(5)).toBe(0)
  expect((await fx.queue.getJob('l3'))?.state).toBe('wait')
})
