/**
 * BullMQ's tests/concurrency.test.ts (queue.setGlobalConcurrency, getGlobalConcurrency,
 * removeGlobalConcurrency, isMaxed), ported whole. They run on LIBRARIES (adapter.ts). BullMQ's assertions
 * and timings are kept; its progress bar is left out, `after(n, fn)` is adapter.ts `counted(n)`, and
 * `new RateLimitError()` is `Worker.RateLimitError()` (BullMQ 6.7's static, which returns one; the
 * adapter's Lib carries no RateLimitError). A `delay(N)` that waited for something is an event or a poll
 * (waitFor); one that is the gap a case is about (a lease running out, an idle window) is `until`. Every
 * case passes on BullMQ 6.7: none is left out as newer than it.
 */
import type { Job, Worker } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, LIBRARIES, until, usePort } from './adapter.js'

const redis = useRedis()

/** A processor's work (BullMQ's `delay`): how long a run lasts, never a wait for something. */
const work = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const jobsOf = (numJobs: number) => Array.from({ length: numJobs }, (_, j) => ({ name: 'test', data: { foo: `bar${j}` } }))

describe.each(LIBRARIES)('%s: Concurrency', (name) => {
  const t = usePort(redis, name)

  it('should run max concurrency for jobs added', { timeout: 16_000 }, async () => {
    const numJobs = 15
    const noConcurrency = await t.queue.getGlobalConcurrency()
    expect(noConcurrency).toBeNull()

    await t.queue.addBulk(jobsOf(numJobs))
    await t.queue.setGlobalConcurrency(1)

    let count = 0
    let parallelJobs = 0
    let lastJobId = 0
    let worker: Worker | undefined
    const processing = new Promise<void>((resolve, reject) => {
      worker = t.worker(
        async (job) => {
          try {
            // Check order is correct
            expect(job.id).toBe(`${++lastJobId}`)
            count++
            parallelJobs++
            await work(100)
            parallelJobs--
            expect(parallelJobs).toEqual(0)
            if (count === numJobs) resolve()
          } catch (err) {
            reject(err)
            throw err
          }
        },
        { autorun: false, concurrency: 10, drainDelay: 10 },
      )
    })
    await worker?.waitUntilReady()
    void worker?.run()
    await processing

    const globalConcurrency = await t.queue.getGlobalConcurrency()
    expect(globalConcurrency).toEqual(1)
  })

  it('should run max concurrency for jobs added (global concurrency removed)', { timeout: 4_000 }, async () => {
    const numJobs = 16
    await t.queue.addBulk(jobsOf(numJobs))
    await t.queue.setGlobalConcurrency(1)
    await t.queue.removeGlobalConcurrency()

    let count = 0
    let parallelJobs = 0
    let lastJobId = 0
    let worker: Worker | undefined
    const processing = new Promise<void>((resolve, reject) => {
      worker = t.worker(
        async (job) => {
          try {
            // Check order is correct
            expect(job.id).toBe(`${++lastJobId}`)
            count++
            parallelJobs++
            await work(100)
            expect(parallelJobs).toEqual(2)
            await work(100)
            parallelJobs--
            if (count === numJobs) resolve()
          } catch (err) {
            reject(err)
            throw err
          }
        },
        { autorun: false, concurrency: 2, drainDelay: 10 },
      )
    })
    await worker?.waitUntilReady()
    void worker?.run()
    await processing

    const globalConcurrency = await t.queue.getGlobalConcurrency()
    expect(globalConcurrency).toBeNull()
  })

  it('emits drained global event only once when worker is idle', { timeout: 6_000 }, async () => {
    t.worker(
      async () => {
        await work(25)
      },
      { concurrency: 10, drainDelay: 1 },
    )

    let counterDrainedEvents = 0
    const queueEvents = await t.events()
    queueEvents.on('drained', () => {
      counterDrainedEvents++
    })

    await t.queue.addBulk([
      { name: 'test', data: { foo: 'bar' } },
      { name: 'test', data: { foo: 'baz' } },
    ])
    await t.queue.setGlobalConcurrency(1)
    const idleFrom = performance.now()

    await waitFor(async () => (await t.queue.getJobCountByTypes('completed')) === 2, { what: 'both jobs completed' })
    // BullMQ's delay(4000): the idle window in which drained must come once, not again.
    await until(idleFrom, 4000)

    const jobs = await t.queue.getJobCountByTypes('completed')
    expect(jobs).toBe(2)
    expect(counterDrainedEvents).toBe(1)
  })

  describe('when global dynamic limit is used', () => {
    it('should run max concurrency for jobs added respecting global dynamic limit', { timeout: 10_000 }, async () => {
      const numJobs = 5
      const dynamicLimit = 250
      const duration = 100

      const queueEvents = await t.events()
      await t.queue.setGlobalConcurrency(1)

      const worker = t.worker(
        async (job) => {
          if (job.attemptsStarted === 1) {
            await t.queue.rateLimit(dynamicLimit)
            throw t.lib.Worker.RateLimitError()
          }
        },
        { autorun: false, concurrency: 10, drainDelay: 10, limiter: { max: 1, duration } },
      )
      await worker.waitUntilReady()

      const startTime = Date.now()
      const completed = counted(numJobs)
      const result = new Promise<void>((resolve, reject) => {
        // after every job has been completed
        completed.done.then(() => {
          try {
            const timeDiff = Date.now() - startTime
            expect(timeDiff).toBeGreaterThanOrEqual(numJobs * (dynamicLimit + duration) - duration)
            resolve()
          } catch (err) {
            reject(err)
          }
        }, reject)
        queueEvents.on('completed', completed.listener)
        queueEvents.on('failed', (err) => reject(err))
      })

      await t.queue.addBulk(jobsOf(numJobs))
      void worker.run()
      await result
    })

    describe('when max limiter is greater than 1', () => {
      it('should run max concurrency for jobs added first processed', { timeout: 4_000 }, async () => {
        const numJobs = 10
        const dynamicLimit = 250
        const duration = 100

        const queueEvents = await t.events()
        await t.queue.setGlobalConcurrency(1)

        const worker = t.worker(
          async (job) => {
            if (job.attemptsStarted === 1) {
              await t.queue.rateLimit(dynamicLimit)
              throw t.lib.Worker.RateLimitError()
            }
          },
          { autorun: false, concurrency: 10, drainDelay: 10, limiter: { max: 2, duration } },
        )
        await worker.waitUntilReady()

        const startTime = Date.now()
        const completed = counted(numJobs)
        const result = new Promise<void>((resolve, reject) => {
          // after every job has been completed
          completed.done.then(() => {
            try {
              const timeDiff = Date.now() - startTime
              expect(timeDiff).toBeGreaterThanOrEqual(numJobs * dynamicLimit)
              resolve()
            } catch (err) {
              reject(err)
            }
          }, reject)
          queueEvents.on('completed', completed.listener)
          queueEvents.on('failed', (err) => reject(err))
        })

        await t.queue.addBulk(jobsOf(numJobs))
        void worker.run()
        await result
      })
    })
  })

  describe('when moving job to waiting-children', () => {
    it('should run max concurrency for jobs added first processed', { timeout: 16_000 }, async () => {
      const numJobs = 5
      const flow = t.flow()

      await t.queue.addBulk(jobsOf(numJobs))
      await t.queue.setGlobalConcurrency(1)

      const name = 'child-job'
      await flow.add({
        name: 'parent-job',
        queueName: t.queueName,
        data: {},
        children: [
          {
            name,
            data: { idx: 0, foo: 'bar' },
            queueName: t.queueName,
            children: [{ name, data: { idx: 0, foo: 'bar' }, queueName: t.queueName }],
          },
        ],
      })

      let count = 0
      let parallelJobs = 0
      let worker: Worker | undefined
      const processing = new Promise<void>((resolve, reject) => {
        worker = t.worker(
          async (job, token) => {
            try {
              count++
              parallelJobs++
              await work(100)
              parallelJobs--
              expect(parallelJobs).toEqual(0)
              await job.moveToWaitingChildren(token as string)
              if (count === numJobs + 3) resolve()
            } catch (err) {
              reject(err)
              throw err
            }
          },
          { autorun: false, concurrency: 10, drainDelay: 10 },
        )
      })
      await worker?.waitUntilReady()
      void worker?.run()
      await processing
    })
  })

  it('should automatically process stalled jobs respecting group order', { timeout: 10_000 }, async () => {
    const numJobs = 4
    const globalConcurrency = 2
    for (let j = 0; j < numJobs; j++) {
      await t.queue.add('test-stalled', { foo: j % 2 })
    }
    await t.queue.setGlobalConcurrency(globalConcurrency)

    const concurrency = 4

    const worker = t.worker(() => work(10000), { autorun: false, lockDuration: 1000, stalledInterval: 100, concurrency })
    const allActive = counted(globalConcurrency)
    worker.on('active', allActive.listener)
    // (BullMQ suppresses this worker's errors during its force close: the fixture keeps them in t.errors.)
    void worker.run()
    await allActive.done
    await worker.close(true)

    const processedJobs: { data: unknown }[] = []
    const worker2 = t.worker(
      async (job: Job) => {
        await work(10)
        processedJobs.push({ data: job.data.foo })
      },
      { autorun: false, concurrency, stalledInterval: 100 },
    )
    const allCompleted = counted(numJobs)
    worker2.on('completed', allCompleted.listener)
    const allStalled = counted<[string, string]>(globalConcurrency)
    worker2.on('stalled', allStalled.listener)

    void worker2.run()
    for (const [, prev] of await allStalled.done) expect(prev).toBe('active')

    await allCompleted.done
    await worker2.close()

    let index = 0
    let sum = 0
    for (let i = 1; i <= numJobs; i++) {
      const job = processedJobs[index++] as { data: unknown }
      sum += Number(job.data)
      if (i % 2 === 0) {
        expect(sum).toBe(1)
        sum = 0
      }
    }
  })

  describe('when jobs use backoff strategy', () => {
    /** BullMQ's two backoff cases: every job fails its first run, retried after `backoff` ms, under a global concurrency of 1. */
    async function retriedOnce(numJobs: number, backoff: number, concurrency: number, workMs: number) {
      for (let j = 0; j < numJobs; j++) {
        await t.queue.add('test', { foo: `bar${j}` }, { attempts: 2, backoff })
      }
      await t.queue.setGlobalConcurrency(1)

      const processedJobs: { data: unknown }[] = []
      const processing = new Promise<void>((resolve) => {
        t.worker(
          async (job) => {
            await work(workMs)
            if (job.attemptsStarted === 1) throw new Error('Not yet!')
            processedJobs.push({ data: job.data })
            if (processedJobs.length === numJobs) resolve()
          },
          { concurrency },
        )
      })
      await processing
      expect(processedJobs.length).toBe(numJobs)
    }

    it('processes jobs without getting stuck', { timeout: 20_000 }, () => retriedOnce(2, 100, 10, 25))

    describe('when backoff is 0', () => {
      it('processes jobs without getting stuck', { timeout: 10_000 }, () => retriedOnce(7, 0, 4, 20))
    })
  })

  describe('when lock is expired and removing a job in active state', () => {
    it('does not get stuck in max state', { timeout: 10_000 }, async () => {
      const globalConcurrency = 1
      await t.queue.waitUntilReady()
      await t.queue.setGlobalConcurrency(globalConcurrency)
      // BullMQ's options: a 20 ms lock nothing renews or checks.
      const bullmqOptions = { lockRenewTime: 200, lockDuration: 20, skipStalledCheck: true, skipLockRenewal: true }
      let worker: Worker
      if (name === 'bullmq') {
        worker = t.worker(null as never, bullmqOptions)
      } else {
        // EchoMQ refuses them, documented: lockRenewTime above half of lockDuration, and skipLockRenewal, an
        // option it does not take (docs/migrating-from-bullmq.md: "lock renewal", "unknown options"). A worker
        // with no processor renews no lease (docs/changing-jobs.md, "Processing jobs by hand"), which is what
        // skipLockRenewal asks: the same worker without them.
        expect(() => t.worker(null as never, bullmqOptions)).toThrow(expect.objectContaining({ code: 'ERR_OPTIONS' }))
        worker = t.worker(null as never, { lockDuration: 20, skipStalledCheck: true })
      }
      const token = 'my-token'
      const numJobs = 4
      for (let j = 0; j < numJobs; j++) {
        await t.queue.add('test', { foo: `bar${j}` })
      }
      const job1 = await worker.getNextJob(token)
      const state = await job1?.getState()
      expect(state).toBe('active')
      const takenAt = performance.now()
      // BullMQ's delay(50): the gap in which the 20 ms lock runs out.
      await until(takenAt, 50)
      let isMaxed = await t.queue.isMaxed()
      expect(isMaxed).toBe(true)
      await job1?.remove()
      isMaxed = await t.queue.isMaxed()
      expect(isMaxed).toBe(false)
    })
  })
})
