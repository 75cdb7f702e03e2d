/**
 * BullMQ's tests of the queue-level limits outside tests/concurrency.test.ts (concurrency.test.ts here), ported:
 * the cases of tests/rate_limiter.test.ts that use setGlobalRateLimit, getGlobalRateLimit and
 * removeGlobalRateLimit, and those of tests/queue.test.ts (`.getMeta`) that use setGlobalConcurrency and
 * setGlobalRateLimit. They run on LIBRARIES (adapter.ts). BullMQ's assertions and timings are kept; `after(n,
 * fn)` is adapter.ts `counted(n)`, and a `delay(N)` that is the gap a case is about is `until`. Every case
 * passes on BullMQ 6.7 (maximumRateLimitDelay included): none is left out as newer than it.
 *
 * `queue.getMeta()` is absent from EchoMQ (docs/migrating-from-bullmq-queue.md, "Queue"), which keeps the limits
 * in the queue's meta hash under BullMQ's field names (`concurrency`, `max`, `duration`, the same page): on EchoMQ
 * the `.getMeta` cases assert that, and the hash's fields.
 */
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { queueKeys } from '../../lib/index.js'
import { useRedis } from '../helpers/redis-server.js'
import { counted, LIBRARIES, until, usePort } from './adapter.js'

const redis = useRedis()

/** BullMQ's `currentPackageVersion` (its src/version.ts): the installed BullMQ's. */
const currentPackageVersion = (createRequire(import.meta.url)('bullmq/package.json') as { version: string }).version

/**
 * BullMQ's pattern of these cases: resolves once `numJobs` jobs completed and `check` passes (it runs then),
 * rejects when a job fails (closing the worker) or `check` throws.
 */
function allCompleted(
  queueEvents: { on(event: string, listener: (...args: never[]) => unknown): unknown },
  worker: { close(): Promise<unknown> },
  numJobs: number,
  check: () => void,
): Promise<void> {
  const completed = counted(numJobs)
  return new Promise<void>((resolve, reject) => {
    // after every job has been completed
    completed.done.then(() => {
      try {
        check()
        resolve()
      } catch (err) {
        reject(err)
      }
    }, reject)
    queueEvents.on('completed', completed.listener)
    queueEvents.on('failed', async (err) => {
      await worker.close()
      reject(err)
    })
  })
}

describe.each(LIBRARIES)('%s: Rate Limiter, global limits', (name) => {
  const t = usePort(redis, name)

  describe('when setting rate limit globally', () => {
    it('should obey the rate limit', { timeout: 7_000 }, async () => {
      const numJobs = 10
      const queueEvents = await t.events()

      const worker = t.worker(async () => {
        const currentTtl = await t.queue.getRateLimitTtl()
        expect(currentTtl).toBeLessThanOrEqual(500)
        expect(currentTtl).toBeGreaterThan(200)
      })

      await t.queue.setGlobalRateLimit(1, 500)
      const globalRateLimit = await t.queue.getGlobalRateLimit()

      expect(globalRateLimit).toEqual({ max: 1, duration: 500 })

      let startTime = 0
      const result = allCompleted(queueEvents, worker, numJobs, () => {
        const timeDiff = Date.now() - startTime
        expect(timeDiff).toBeGreaterThanOrEqual((numJobs - 1) * 500)
      })

      startTime = Date.now()
      await t.queue.addBulk(Array.from({ length: numJobs }, () => ({ name: 'rate test', data: {} })))

      await result
    })

    describe('when rate limit is removed', () => {
      it('should execute jobs without rate limit', { timeout: 2_000 }, async () => {
        const numJobs = 10
        const queueEvents = await t.events()

        const worker = t.worker(async () => {
          const currentTtl = await t.queue.getRateLimitTtl()
          expect(currentTtl).toBe(-2) // -2 means no rate limit
        })

        await t.queue.setGlobalRateLimit(1, 500)
        await t.queue.removeGlobalRateLimit()

        const globalRateLimit = await t.queue.getGlobalRateLimit()

        expect(globalRateLimit).toBeNull()

        let startTime = 0
        const result = allCompleted(queueEvents, worker, numJobs, () => {
          const timeDiff = Date.now() - startTime
          expect(timeDiff).toBeLessThanOrEqual(150)
        })

        const jobs = Array.from({ length: numJobs }, () => ({ name: 'rate test', data: {} }))
        startTime = Date.now()
        await t.queue.addBulk(jobs)

        await result
      })
    })
  })

  describe('when dynamic limit is used', () => {
    describe('when removing rate limit', () => {
      describe('when maximumRateLimitDelay is reached', () => {
        it('should continue processing jobs', { timeout: 50_000 }, async () => {
          const numJobs = 4
          const duration = 10000

          const worker = t.worker(async () => undefined, { autorun: false, maximumRateLimitDelay: 3000 })
          await t.queue.setGlobalRateLimit(1, duration)

          const completing = counted(numJobs, 50_000)
          worker.on('completed', completing.listener)

          await t.queue.addBulk(Array.from({ length: numJobs }, () => ({ name: 'rate test', data: {} })))

          const waitingCountBeforeRun = await t.queue.getWaitingCount()
          expect(waitingCountBeforeRun).toBe(4)

          void worker.run()
          const ranAt = performance.now()

          // BullMQ's delay(1500): the limit is removed while the worker sleeps under it (for up to
          // maximumRateLimitDelay, 3000 ms, of the 10 s window). BullMQ's second delay(1500), before it awaits
          // the completions, is left out: the completions are the event it waits for.
          await until(ranAt, 1500)
          await t.queue.removeGlobalRateLimit()

          await completing.done

          const completedCountAfterRLRemoval = await t.queue.getCompletedCount()
          expect(completedCountAfterRLRemoval).toBe(4)
        })
      })
    })
  })

  describe('.getMeta', () => {
    it('should return global concurrency', async () => {
      await t.queue.setGlobalConcurrency(1)
      if (name === 'bullmq') {
        const config = await t.queue.getMeta()

        expect(config).toMatchObject({
          maxLenEvents: 10000,
          paused: false,
          concurrency: 1,
        })
        expect(config.version?.startsWith('bullmq')).toBe(true)
        expect(config.version?.endsWith(`:${currentPackageVersion}`)).toBe(true)
      } else {
        // Absent (docs/migrating-from-bullmq-queue.md): the limit is meta's `concurrency`, BullMQ's field.
        expect((t.queue as unknown as Record<string, unknown>).getMeta).toBeUndefined()
        expect(await redis.client.hgetall(queueKeys('emq', t.queueName).meta)).toMatchObject({ concurrency: '1' })
        expect(await t.queue.isPaused()).toBe(false)
        expect(await t.queue.getGlobalConcurrency()).toBe(1)
      }
    })

    it('should return global rate limit', async () => {
      await t.queue.setGlobalRateLimit(1, 500)
      if (name === 'bullmq') {
        const config = await t.queue.getMeta()

        expect(config).toMatchObject({
          maxLenEvents: 10000,
          paused: false,
          max: 1,
          duration: 500,
        })
        expect(config.version?.startsWith('bullmq')).toBe(true)
        expect(config.version?.endsWith(`:${currentPackageVersion}`)).toBe(true)
      } else {
        // Absent (docs/migrating-from-bullmq-queue.md): the limit is meta's `max` and `duration`, BullMQ's fields.
        expect((t.queue as unknown as Record<string, unknown>).getMeta).toBeUndefined()
        expect(await redis.client.hgetall(queueKeys('emq', t.queueName).meta)).toMatchObject({ max: '1', duration: '500' })
        expect(await t.queue.isPaused()).toBe(false)
        expect(await t.queue.getGlobalRateLimit()).toEqual({ max: 1, duration: 500 })
      }
    })
  })
})
