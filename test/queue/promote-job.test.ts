/**
 * queue.promoteJob(id): a delayed job (a delayed add, or a retry in its backoff) goes to `wait` now, due
 * or not, and a worker runs it; a job that is not delayed, or missing, is refused and nothing changes.
 * Also: a job's stored options (`opts`) read back as they were given.
 */
import { describe, expect, it } from 'vitest'
import { type EchoMQError, type Job, QueueEvents } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

const codeOf = async (promise: Promise<unknown>) => ((await promise.catch((e: unknown) => e)) as EchoMQError).code

describe('promoteJob', () => {
  it("a prioritized job goes to its priority; a scheduler's pending run runs now and the schedule moves on", async () => {
    await fx.queue.add('later', {}, { jobId: 'p', delay: 3_600_000, priority: 2 })
    await fx.queue.promoteJob('p')
    expect((await fx.queue.getJob('p'))?.state).toBe('prioritized')
    await fx.queue.upsertJobScheduler('hourly', { every: 3_600_000, startDate: Date.now() + 3_600_000 }, { name: 'tick' })
    const first = (await fx.queue.getJobScheduler('hourly'))?.next as number
    await fx.queue.promoteJob(`repeat:hourly:${first}`)
    expect((await fx.queue.getJob(`repeat:hourly:${first}`))?.state).toBe('wait')
    expect((await fx.queue.getJobScheduler('hourly'))?.next).toBe(first + 3_600_000)
    // Its next run is made when a worker starts this one (or when it falls due), as BullMQ's.
    expect(await fx.queue.getJob(`repeat:hourly:${first + 3_600_000}`)).toBeUndefined()
    // Promoted already: refused, and nothing changes.
    expect(await codeOf(fx.queue.promoteJob(`repeat:hourly:${first}`))).toBe('ERR_JOB_STATE')
    expect(await codeOf(fx.queue.promoteJob('repeat:hourly:1'))).toBe('ERR_JOB_MISSING')
    expect(await codeOf(fx.queue.promoteJob(`repeat:hourly:${first + 3_600_000}`))).toBe('ERR_JOB_MISSING')
    expect(await fx.queue.counts()).toMatchObject({ wait: 1, prioritized: 1, delayed: 0 })
  })

  it('a job delayed an hour runs now; its waiting event names delayed as prev', async () => {
    const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
    await events.waitUntilReady()
    try {
      await fx.queue.add('later', { n: 1 }, { jobId: 'd', delay: 3_600_000 })
      await fx.queue.add('later', { n: 2 }, { jobId: 'other', delay: 3_600_000 })
      const waiting = nextEvent<[{ jobId: string; prev?: string }]>(events, 'waiting')

      await fx.queue.promoteJob('d')

      expect((await waiting)[0]).toMatchObject({ jobId: 'd', prev: 'delayed' })
      const job = await fx.queue.getJob('d')
      expect(job?.state).toBe('wait')
      expect(job?.dueAt).toBeUndefined()
      expect(await fx.queue.counts()).toMatchObject({ wait: 1, delayed: 1 })
      const ran: string[] = []
      fx.worker((j: Job) => void ran.push(j.id))
      await waitFor(async () => (await fx.queue.getJob('d'))?.state === 'completed', { what: 'the promoted job to complete' })
      expect(ran).toEqual(['d'])
      expect((await fx.queue.getJob('other'))?.state).toBe('delayed')
    } finally {
      await events.close()
    }
  })

  it('a retry waiting its backoff is promoted', async () => {
    let runs = 0
    const w = fx.worker(() => {
      runs++
      if (runs === 1) throw new Error('first run fails')
    })
    await fx.queue.add('flaky', {}, { jobId: 'f', attempts: 2, backoff: 3_600_000 })
    await waitFor(async () => (await fx.queue.getJob('f'))?.state === 'delayed', { what: 'the retry to wait its backoff' })
    await fx.queue.promoteJob('f')
    await waitFor(async () => (await fx.queue.getJob('f'))?.state === 'completed', { what: 'the retry to run' })
    expect(runs).toBe(2)
    await w.close()
  })

  it('refuses a job that is not delayed (ERR_JOB_STATE) or missing (ERR_JOB_MISSING), and a bad id, changing nothing', async () => {
    await fx.queue.add('now', {}, { jobId: 'w' })
    const before = await fx.queue.counts()
    expect(await codeOf(fx.queue.promoteJob('w'))).toBe('ERR_JOB_STATE')
    expect(await codeOf(fx.queue.promoteJob('nope'))).toBe('ERR_JOB_MISSING')
    expect(await codeOf(fx.queue.promoteJob('a:b'))).toBe('ERR_JOB_ID')
    expect(await codeOf(fx.queue.promoteJob('wait'))).toBe('ERR_JOB_ID')
    expect(await fx.queue.counts()).toEqual(before)
    expect((await fx.queue.getJob('w'))?.state).toBe('wait')
  })
})

describe("a job's stored options", () => {
  it('read back as given (opts), the queue defaults filled in', async () => {
    await fx.queue.add(
      'x',
      {},
      {
        jobId: 'a',
        attempts: 5,
        backoff: { type: 'exponential', delay: 1_000, maxDelay: 60_000, jitter: 0.5 },
        removeOnComplete: true,
        removeOnFail: { count: 10, age: 60_000 },
        keepLogs: 20,
      },
    )
    await fx.queue.add('x', {}, { jobId: 'b', backoff: 250, removeOnComplete: false, removeOnFail: 7 })
    await fx.queue.add('x', {}, { jobId: 'c', removeOnFail: { age: 1_000 } })
    expect((await fx.queue.getJob('a'))?.opts).toEqual({
      jobId: 'a',
      timestamp: expect.any(Number),
      attempts: 5,
      backoff: { type: 'exponential', delay: 1_000, maxDelay: 60_000, jitter: 0.5 },
      removeOnComplete: true,
      removeOnFail: { count: 10, age: 60_000 },
      keepLogs: 20,
      stackTraceLimit: 10,
    })
    expect((await fx.queue.getJob('b'))?.opts).toEqual({
      jobId: 'b',
      timestamp: expect.any(Number),
      attempts: 1,
      backoff: { type: 'fixed', delay: 250 },
      removeOnComplete: false,
      removeOnFail: 7,
      stackTraceLimit: 10,
    })
    expect((await fx.queue.getJob('c'))?.opts).toEqual({
      jobId: 'c',
      timestamp: expect.any(Number),
      attempts: 1,
      removeOnComplete: { count: 1000, age: 86_400 },
      removeOnFail: { age: 1_000 },
      stackTraceLimit: 10,
    })
    // The defaults are not stored: a job added with them holds only what is its own.
    await fx.queue.add('x', { n: 1 }, { jobId: 'd' })
    expect(Object.keys(await redis.client.hgetall(fx.queue.keys.job('d'))).sort()).toEqual(['createdOn', 'data', 'name', 'state'])
    expect((await fx.queue.getJob('d'))?.opts).toEqual({
      jobId: 'd',
      timestamp: expect.any(Number),
      attempts: 1,
      removeOnComplete: { count: 1000, age: 86_400 },
      removeOnFail: { count: 10_000, age: 604_800 },
      stackTraceLimit: 10,
    })
  })
})
