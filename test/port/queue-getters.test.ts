/**
 * BullMQ's tests of queue.promoteJobs (tests/queue.test.ts), queue.getCountsPerPriority
 * (tests/getters.test.ts) and queue.removeRateLimitKey (tests/rate_limiter.test.ts), ported. They run on
 * LIBRARIES (adapter.ts).
 */
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { counted, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

describe.each(LIBRARIES)('%s: promoteJobs and getCountsPerPriority', (name) => {
  const t = usePort(redis, name)

  it('promoteJobs promotes every delayed job', async () => {
    const jobCount = 8
    for (let i = 0; i < jobCount; i++) await t.queue.add('test', { idx: i }, { delay: 10_000 })
    expect((await t.queue.getJobCounts('delayed')).delayed).toBe(jobCount)
    await t.queue.promoteJobs()
    expect((await t.queue.getJobCounts('waiting')).waiting).toBe(jobCount)
    const completed = counted(jobCount)
    t.worker(() => undefined).on('completed', completed.listener)
    await completed.done
    expect((await t.queue.getJobCounts('delayed')).delayed).toBe(0)
  })

  it('promoteJobs with a count promotes them all, that many at a time', async () => {
    await t.queue.addBulk(Array.from({ length: 7 }, (_, i) => ({ name: 'test', data: { i }, opts: { delay: 60_000 } })))
    await t.queue.promoteJobs({ count: 3 })
    expect(await t.queue.getJobCounts('delayed', 'waiting')).toEqual({ delayed: 0, waiting: 7 })
  })

  it.each([false, true])('getCountsPerPriority counts waiting jobs per priority (queue paused: %s)', async (paused) => {
    if (paused) await t.queue.pause()
    await t.queue.addBulk(Array.from({ length: 42 }, (_, index) => ({ name: 'test', data: {}, opts: { priority: index % 4 } })))
    expect(await t.queue.getCountsPerPriority([0, 1, 2, 3])).toEqual({ '0': 11, '1': 11, '2': 10, '3': 10 })
  })

  it('removeRateLimitKey lifts a rateLimit hold: jobs run again', async () => {
    const worker = t.worker(() => 'done', { autorun: false })
    await worker.rateLimit(60_000)
    expect(await t.queue.getRateLimitTtl()).toBeGreaterThan(50_000)
    expect(await t.queue.removeRateLimitKey()).toBe(1)
    expect(await t.queue.getRateLimitTtl()).toBe(-2)
    const completed = counted(1)
    worker.on('completed', completed.listener)
    await t.queue.add('test', {})
    void worker.run()
    await completed.done
  })
})
