/**
 * BullMQ's tests of delayed jobs (tests/delay.test.ts), ported, run on BullMQ 6.7 and on EchoMQ. Its
 * `autorun: false` variants make the worker first and call `worker.run()` later: the same cases here, with
 * the worker made when it should start (`autorun: false` itself is worker-run.test.ts's).
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, differs, first, LIBRARIES, until, usePort } from './adapter.js'

const redis = useRedis()

/** How long a job waited between its add and its start (both stamped by the library, ms). */
const waited = (job: Job) => (job.processedOn as number) - job.timestamp

describe.each(LIBRARIES)('%s: delayed jobs', (name) => {
  const t = usePort(redis, name)

  it('a delayed job runs only after its delay, with a delayed event', async () => {
    const delay = 1000
    const events = await t.events()
    const delayed = first<{ jobId: string; delay: number }>()
    events.on('delayed', delayed.listener)
    const done = first<Job>()
    t.worker(() => undefined).on('completed', done.listener)

    const job = await t.queue.add('test', { delayed: 'foobar' }, { delay })
    expect(job.id).toBeTruthy()
    expect(job.data.delayed).toBe('foobar')
    expect(job.opts.delay).toBe(delay)
    expect(job.delay).toBe(delay)

    expect((await delayed.value).jobId).toBe(job.id)
    const completed = await done.value
    expect(waited(completed)).toBeGreaterThanOrEqual(delay)
    expect(waited(completed), 'processedOn is not within margin').toBeLessThan(delay * 1.2)
    expect(await t.queue.getWaiting()).toHaveLength(0)
    expect(await t.queue.getDelayed()).toHaveLength(0)
  })

  it('delay 0 without a priority adds the job to wait', async () => {
    const job = await t.queue.add('test', {}, { delay: 0 })
    expect(await job.getState()).toBe('waiting')
  })

  it('delay 0 with a priority adds the job to prioritized', async () => {
    const job = await t.queue.add('test', {}, { delay: 0, priority: 1 })
    expect(await job.getState()).toBe('prioritized')
  })

  it('a paused queue still moves its due delayed jobs to waiting', async () => {
    const delay = 1000
    const events = await t.events()
    await t.queue.pause()
    t.worker(() => undefined)
    const waiting = first<{ jobId: string; prev?: string }>()
    const started = performance.now()
    events.on('waiting', waiting.listener)
    const job = await t.queue.add('test', { delayed: 'foobar' }, { delay })
    const event = await waiting.value
    const elapsed = performance.now() - started
    expect(event).toEqual({ jobId: job.id, prev: 'delayed' })
    expect(elapsed).toBeGreaterThanOrEqual(delay)
    expect(elapsed).toBeLessThanOrEqual(delay * 1.2)
    expect(await job.getState()).toBe('waiting')
  })

  it('a due delayed job with a priority waits in prioritized', async () => {
    await t.queue.pause()
    t.worker(() => undefined)
    const job = await t.queue.add('test', {}, { delay: 300, priority: 2 })
    expect(await job.getState()).toBe('delayed')
    await waitFor(async () => (await job.getState()) === 'prioritized', { what: 'the job prioritized' })
    expect(await t.queue.getJobCounts('delayed', 'prioritized', 'waiting')).toEqual({ delayed: 0, prioritized: 1, waiting: 0 })
  })

  it('a short delay added after a job delayed by a year still runs on time', async () => {
    const delay = 1000
    const done = first<Job>()
    t.worker(() => undefined).on('completed', done.listener)
    await t.queue.add('test', { delayed: 'foobar' }, { delay: 365 * 24 * 3600 * 1000 })
    const job = await t.queue.add('test', { delayed: 'foobar' }, { delay })
    expect(job.opts.delay).toBe(delay)
    expect(job.delay).toBe(delay)
    const completed = await done.value
    expect(completed.id).toBe(job.id)
    expect(waited(completed)).toBeGreaterThanOrEqual(delay)
    expect(waited(completed), 'processedOn is not within margin').toBeLessThan(delay * 1.2)
    expect(await t.queue.getWaiting()).toHaveLength(0)
    expect(await t.queue.getDelayed()).toHaveLength(1)
    expect(await t.queue.getJobCountByTypes('active')).toBe(0)
  })

  it('delayed jobs run in the order of their due times', async () => {
    const count = 6
    const order: number[] = []
    const late: string[] = []
    const done = counted<[Job]>(count)
    const worker = t.worker((job) => {
      order.push(job.data.order)
      const delay = job.opts.delay as number
      if (waited(job) < delay || waited(job) >= delay * 1.2) late.push(`${job.data.order}: ${waited(job)} ms for ${delay}`)
    })
    worker.on('completed', done.listener)
    // Added last-due first: the order they run in is the delays', not the adds'.
    await t.queue.addBulk(
      Array.from({ length: count }, (_, index) => ({
        name: 'test',
        data: { order: count - index },
        opts: { delay: 500 + (count - index) * 150 },
      })),
    )
    await done.done
    expect(order).toEqual([1, 2, 3, 4, 5, 6])
    expect(late).toEqual([])
  })

  it('two workers run delayed jobs after their delay and within a margin', async () => {
    const count = 50
    const late: string[] = []
    const done = counted<[Job]>(count, 15_000)
    const processor = async (job: Job) => {
      const delay = job.opts.delay as number
      if (waited(job) < delay || waited(job) >= Math.max(delay * 1.3, delay + 250)) late.push(`${waited(job)} ms for ${delay}`)
      // The job's work: keeps the two workers' slots busy at once.
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    t.worker(processor, { concurrency: count / 2 }).on('completed', done.listener)
    t.worker(processor, { concurrency: count / 2 }).on('completed', done.listener)
    await t.queue.addBulk(
      Array.from({ length: count }, (_, index) => ({ name: 'test', data: { order: count - index }, opts: { delay: 500 + count - index } })),
    )
    await done.done
    expect(late).toEqual([])
  })

  it('overlapping delays run concurrently, each after its delay', async () => {
    const delay = 250
    const count = 10
    const late: number[] = []
    const done = counted<[Job]>(count)
    t.worker(
      (job) => {
        if (waited(job) < delay || waited(job) >= delay * 2) late.push(waited(job))
      },
      { concurrency: 100 },
    ).on('completed', done.listener)
    const start = performance.now()
    for (let index = 1; index <= count; index++) {
      await t.queue.add('my-queue', { foo: 'bar', index }, { delay })
      // Staggered adds, 50 ms apart: each job's delay overlaps the next ones'.
      await until(start, index * 50)
    }
    await done.done
    expect(late).toEqual([])
  })

  it('failed jobs retried through delayed do not get stuck', async () => {
    const processed: unknown[] = []
    const done = counted<[Job]>(2)
    t.worker(
      async (job) => {
        if (job.attemptsMade === 0) {
          // A first run that takes a while, then fails: its retry goes through delayed (backoff 10 ms).
          await new Promise((resolve) => setTimeout(resolve, 250))
          throw new Error('forced error in test')
        }
        processed.push(job.data)
      },
      { concurrency: 50 },
    ).on('completed', done.listener)
    for (let j = 0; j < 2; j++) await t.queue.add('test', { foo: `bar${j}` }, { attempts: 2, backoff: 10 })
    await done.done
    expect(processed).toHaveLength(2)
    expect(await t.queue.getJobCountByTypes('failed', 'wait', 'delayed')).toBe(0)
  })

  it('delayed jobs due at the same time run in the order they were added (FIFO)', async () => {
    // BullMQ's case adds each job with `timestamp: now`; EchoMQ refuses `timestamp` (a job's creation time is
    // Redis's clock: docs/migrating-from-bullmq-queue.md, "Job options"), so the jobs are added in one addBulk.
    const count = 43
    const order: number[] = []
    const done = counted<[Job]>(count)
    // A plain list, not counted(): no failure is expected, and a counted() left waiting rejects unheard later.
    const failed: (string | undefined)[] = []
    const worker = t.worker((job) => {
      order.push(job.data.order)
    })
    worker.on('completed', done.listener)
    worker.on('failed', (job) => failed.push(job?.id))
    await t.queue.addBulk(Array.from({ length: count }, (_, i) => ({ name: 'test', data: { order: i + 1 }, opts: { delay: 500 } })))
    await done.done
    expect(order).toEqual(Array.from({ length: count }, (_, i) => i + 1))
    expect(failed).toEqual([])
  })
})

describe.each(LIBRARIES)('%s: promoting a delayed job', (name) => {
  const t = usePort(redis, name)

  it('moves it to waiting at once, with delay 0', async () => {
    const job = await t.queue.add('test', { foo: 'bar' }, { delay: 1500 })
    expect(await job.isDelayed()).toBe(true)
    await job.promote()
    expect(job.delay).toBe(0)
    expect(await job.isDelayed()).toBe(false)
    expect(await job.isWaiting()).toBe(true)
    // Read again: promoted, its delay is 0; its options keep the one it was added with.
    const stored = await t.queue.getJob(job.id as string)
    expect([stored?.delay, stored?.opts.delay]).toEqual([0, 1500])
  })

  it('once it ran, read again: delay 0, opts.delay as added', async () => {
    const done = first<Job>()
    t.worker(() => undefined).on('completed', done.listener)
    const job = await t.queue.add('test', {}, { delay: 100 })
    expect((await done.value).id).toBe(job.id)
    const stored = await t.queue.getJob(job.id as string)
    expect([stored?.delay, stored?.opts.delay]).toEqual([0, 100])
  })

  it('the promoted job runs by its priority', async () => {
    await t.queue.add('test', {}, { jobId: 'a', priority: 1 })
    await t.queue.add('test', {}, { jobId: 'b', priority: 2 })
    await t.queue.add('test', {}, { jobId: 'd', priority: 4 })
    const job = await t.queue.add('test', {}, { jobId: 'c', delay: 2000, priority: 3 })
    await job.promote()
    const done = counted<[Job]>(4)
    t.worker(() => undefined).on('completed', done.listener)
    expect((await done.done).map(([j]) => j.id)).toEqual(['a', 'b', 'c', 'd'])
  })

  it('refuses a job that is not delayed', async () => {
    const job = await t.queue.add('test', { foo: 'bar' })
    expect(await job.isDelayed()).toBe(false)
    await differs.refused(name, job.promote(), `Job ${job.id} is not in the delayed state. promote`, {
      code: 'ERR_JOB_STATE',
      mentions: `job ${job.id} `,
    })
  })

  it.each([
    ['beside a waiting job', 1],
    ['in an empty queue', 0],
  ])('in a paused queue %s, moves it to waiting', async (_, others) => {
    if (others) await t.queue.add('normal', { foo: 'bar' })
    const delayed = await t.queue.add('delayed', { foo: 'bar' }, { delay: 60_000 })
    await t.queue.pause()
    await delayed.promote()
    expect(await t.queue.getWaitingCount()).toBe(others + 1)
    await t.queue.resume()
    expect(await t.queue.getWaitingCount()).toBe(others + 1)
    expect(await delayed.getState()).toBe('waiting')
  })
})

describe.each(LIBRARIES)('%s: changeDelay', (name) => {
  const t = usePort(redis, name)

  it('reschedules a delayed job', async () => {
    const done = first<Job>()
    t.worker(() => undefined).on('completed', done.listener)
    const job = await t.queue.add('test', { foo: 'bar' }, { delay: 60_000 })
    expect(await job.isDelayed()).toBe(true)
    await job.changeDelay(500)
    expect(await job.isDelayed()).toBe(true)
    expect(job.delay).toBe(500)
    const completed = await done.value
    expect(completed.id).toBe(job.id)
    expect(waited(completed)).toBeGreaterThanOrEqual(500)
    expect(waited(completed)).toBeLessThan(60_000)
  })

  it('refuses a job that is not delayed', async () => {
    const job = await t.queue.add('test', { foo: 'bar' })
    await differs.refused(name, job.changeDelay(2000), `Job ${job.id} is not in the delayed state. changeDelay`, {
      code: 'ERR_JOB_STATE',
      mentions: `job ${job.id} `,
    })
  })
})

describe.each(LIBRARIES)('%s: job.delay after a backoff', (name) => {
  const t = usePort(redis, name)

  it("is the retry's backoff, on the failed job and the stored one", async () => {
    const failed = first<Job | undefined>()
    t.worker(() => {
      throw new Error('error')
    }).on('failed', failed.listener)
    await t.queue.add('test', { bar: 'baz' }, { attempts: 3, backoff: 300 })
    const job = await failed.value
    expect(job?.delay).toBe(300)
    expect((await t.queue.getJob(job?.id as string))?.delay).toBe(300)
  })
})
