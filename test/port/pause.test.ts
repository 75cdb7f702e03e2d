/**
 * BullMQ's tests/pause.test.ts, ported, run on BullMQ 6.7 and on EchoMQ. Left out: the two "legacy paused list"
 * cases (they push into BullMQ's Redis keys directly). Assertions made inside processors and listeners are
 * collected and checked at the end of each case. Where BullMQ's cases wait fixed times for a delayed job to
 * fall due, these poll with a deadline; its "pauses fast" case asserts that pause() resolves, not its time.
 */
import type { Job, QueueEvents } from 'bullmq'
import { beforeEach, describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { collector, LIBRARIES, runFor, usePort } from './adapter.js'

const redis = useRedis()

/** A turn of the event loop: the calls around it are made one after another, not at once. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe.each(LIBRARIES)('%s: pause', (name) => {
  const t = usePort(redis, name)
  let queueEvents: QueueEvents

  beforeEach(async () => {
    queueEvents = await t.events()
  })

  it('should not process delayed jobs', async () => {
    let processed = false
    const worker = t.worker(async () => {
      processed = true
    })
    await worker.waitUntilReady()

    await t.queue.pause()
    await t.queue.add('test', {}, { delay: 300 })
    const counts = await t.queue.getJobCounts('waiting', 'delayed')
    expect(counts).toHaveProperty('waiting', 0)
    expect(counts).toHaveProperty('delayed', 1)

    // Due in 300 ms: it moves to waiting, and the paused queue does not run it.
    const counts2 = await waitFor(
      async () => {
        const c = await t.queue.getJobCounts('waiting', 'delayed')
        return c.waiting === 1 ? c : false
      },
      { timeoutMs: 5000, what: 'the delayed job to move to waiting' },
    )
    expect(processed, 'should not process delayed jobs in paused queue').toBe(false)
    expect(counts2).toHaveProperty('waiting', 1)
    expect(counts2).toHaveProperty('delayed', 0)
  })

  it('should pause a queue until resumed', async () => {
    const c = collector()
    let isPaused = false
    let counter = 2
    let resolve!: () => void
    const processPromise = new Promise<void>((r) => {
      resolve = r
    })
    const worker = t.worker(
      async (job: Job) => {
        c.check(() => expect(isPaused).toEqual(false))
        c.check(() => expect(job.data.foo).toBe('paused'))
        counter--
        if (counter === 0) resolve()
      },
      { autorun: false },
    )
    await worker.waitUntilReady()
    void worker.run()

    await t.queue.pause()
    isPaused = true
    await t.queue.add('test', { foo: 'paused' })
    await t.queue.add('test', { foo: 'paused' })
    isPaused = false
    await t.queue.resume()

    await processPromise
    expect(c.failures).toEqual([])
  })

  it('should be able to pause a running queue and emit relevant events', async () => {
    const c = collector()
    let isPaused = false
    let isResumed = true
    let firstJob = true
    let resolve!: () => void
    let reject!: (e: unknown) => void
    const processPromise = new Promise<void>((res, rej) => {
      resolve = res
      reject = rej
    })
    const queue = t.queue
    const worker = t.worker(
      async (job: Job) => {
        try {
          expect(isPaused).toEqual(false)
          expect(job.data.foo).toBe('paused')
          if (firstJob) {
            firstJob = false
            isPaused = true
            return queue.pause()
          }
          expect(isResumed).toEqual(true)
          await queue.close()
          resolve()
        } catch (err) {
          reject(err)
        }
      },
      { autorun: false },
    )
    await worker.waitUntilReady()

    queueEvents.on('paused', async (args, eventId) => {
      isPaused = false
      c.check(() => expect(args).toEqual({}))
      c.check(() => expect(eventId).toBeTypeOf('string'))
      await queue.resume()
    })
    queueEvents.on('resumed', (args, eventId) => {
      c.check(() => expect(args).toEqual({}))
      c.check(() => expect(eventId).toBeTypeOf('string'))
      isResumed = true
    })

    await queue.add('test', { foo: 'paused' })
    await queue.add('test', { foo: 'paused' })
    void worker.run()

    await processPromise
    expect(c.failures).toEqual([])
  })

  it('should pause the queue locally', async () => {
    const c = collector()
    let counter = 2
    let resolve!: () => void
    const processPromise = new Promise<void>((r) => {
      resolve = r
    })
    const worker = t.worker(async () => {
      c.check(() => expect(worker.isPaused()).toEqual(false))
      counter--
      if (counter === 0) {
        await t.queue.close()
        resolve()
      }
    })
    await worker.waitUntilReady()
    await worker.pause()

    await t.queue.add('test', { foo: 'paused' })
    await t.queue.add('test', { foo: 'paused' })

    expect(counter).toEqual(2)
    expect(worker.isPaused()).toEqual(true)

    worker.resume()
    await processPromise
    expect(c.failures).toEqual([])
  })

  it('should wait until active jobs are finished before resolving pause', async () => {
    let startResolve!: () => void
    const startProcessing = new Promise<void>((r) => {
      startResolve = r
    })
    const worker = t.worker(async () => {
      startResolve()
      return runFor(1000)
    })
    await worker.waitUntilReady()

    const jobs: Promise<unknown>[] = []
    for (let i = 0; i < 10; i++) jobs.push(t.queue.add('test', i))
    jobs.push(startProcessing)
    await Promise.all(jobs)
    await worker.pause()

    let active = await t.queue.getJobCountByTypes('active')
    expect(active).toEqual(0)
    expect(worker.isPaused()).toEqual(true)

    // One job from the 10 posted above will be processed, so we expect 9 jobs pending
    let paused = await t.queue.getJobCountByTypes('delayed', 'waiting')
    expect(paused).toEqual(9)

    await t.queue.add('test', {})

    active = await t.queue.getJobCountByTypes('active')
    expect(active).toEqual(0)

    // BullMQ 6.7's JobType no longer names 'paused' (its test still counts it): both libraries take it.
    paused = await t.queue.getJobCountByTypes('paused' as 'waiting', 'waiting', 'delayed')
    expect(paused).toEqual(10)
  })

  it('should pause the queue locally when more than one worker is active', async () => {
    let r1!: () => void
    let r2!: () => void
    const startProcessing1 = new Promise<void>((r) => {
      r1 = r
    })
    const startProcessing2 = new Promise<void>((r) => {
      r2 = r
    })
    const worker1 = t.worker(async () => {
      r1()
      return runFor(200)
    })
    await worker1.waitUntilReady()
    const worker2 = t.worker(async () => {
      r2()
      return runFor(200)
    })
    await worker2.waitUntilReady()

    await Promise.all([t.queue.add('test', 1), t.queue.add('test', 2), t.queue.add('test', 3), t.queue.add('test', 4)])

    await Promise.all([startProcessing1, startProcessing2])
    await Promise.all([worker1.pause(), worker2.pause()])

    const count = await t.queue.getJobCounts('active', 'waiting', 'completed')
    expect(count.active).toEqual(0)
    expect(count.waiting).toEqual(2)
    expect(count.completed).toEqual(2)
  })

  it('should wait for blocking job retrieval to complete before pausing locally', async () => {
    let r!: () => void
    const startProcessing = new Promise<void>((res) => {
      r = res
    })
    const worker = t.worker(async () => {
      r()
      return runFor(200)
    })
    await worker.waitUntilReady()

    await t.queue.add('test', 1)
    await startProcessing
    await worker.pause()
    await t.queue.add('test', 2)

    const count = await t.queue.getJobCounts('active', 'waiting', 'completed')
    expect(count.active).toEqual(0)
    expect(count.waiting).toEqual(1)
    expect(count.completed).toEqual(1)
  })

  it('pauses when the queue is drained', async () => {
    const worker = t.worker(async () => {
      await runFor(50)
    })
    await worker.waitUntilReady()

    const waitDrainedEvent = new Promise<void>((resolve, reject) => {
      queueEvents.once('drained', async () => {
        await t.queue.pause().then(resolve, reject)
      })
    })

    await t.queue.add('test', {})
    await waitDrainedEvent
    expect(await t.queue.isPaused()).toBe(true)
  })

  it('gets the right response from isPaused', async () => {
    await t.queue.pause()
    expect(await t.queue.isPaused()).toBe(true)
    await t.queue.resume()
    expect(await t.queue.isPaused()).toBe(false)
  })

  it('should pause and resume worker without error', { timeout: 8000 }, async () => {
    const worker = t.worker(async () => {
      await runFor(100)
    })
    await worker.waitUntilReady()
    await turn()
    await worker.pause()
    await turn()
    worker.resume()
    await turn()
    await worker.pause()
    await turn()
    await worker.close()
    expect(t.errors).toEqual([])
  })

  describe('when backoff is 0', () => {
    it('moves job into paused queue', async () => {
      const c = collector()
      let resolveProcessing!: () => void
      const processing = new Promise<void>((r) => {
        resolveProcessing = r
      })
      const worker = t.worker(
        async (job: Job) => {
          await runFor(10)
          if (job.attemptsMade === 0) {
            await t.queue.pause()
            throw new Error('Not yet!')
          }
          resolveProcessing()
        },
        { autorun: false },
      )

      const waitingEvent = new Promise<void>((resolve, reject) => {
        queueEvents.on('waiting', async ({ prev }) => {
          try {
            if (prev) {
              expect(prev).toEqual('active')
              const count = await t.queue.getJobCountByTypes('wait')
              expect(count).toBe(1)
              await t.queue.resume()
              resolve()
            }
          } catch (error) {
            reject(error)
          }
        })
      })

      await t.queue.add('test', { foo: 'bar' }, { attempts: 2, backoff: 0 })

      void worker.run()
      await waitingEvent
      await processing
      expect(c.failures).toEqual([])
    })
  })
})
