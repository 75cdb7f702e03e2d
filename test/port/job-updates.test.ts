/**
 * BullMQ's tests of changing a job in place (tests/job.test.ts `.update`, `.changePriority`; tests/worker.test.ts
 * on moveToDelayed with DelayedError and updateData in steps), ported, run on BullMQ 6.7 and on EchoMQ.
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, differs, first, gate, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

describe.each(LIBRARIES)('%s: job updates', (name) => {
  const t = usePort(redis, name)

  /** Runs the queue's jobs with a worker until `count` completed; the completed jobs' names in order. */
  async function completedNames(count: number): Promise<string[]> {
    const completed = counted<[Job]>(count)
    t.worker(() => undefined).on('completed', completed.listener)
    return (await completed.done).map(([job]) => job.name)
  }

  describe('updateData', () => {
    it('replaces the data of a stored job', async () => {
      const job = await t.queue.add('test', { foo: 'bar' })
      await job.updateData({ baz: 'qux' })
      expect((await t.queue.getJob(job.id as string))?.data).toEqual({ baz: 'qux' })
    })

    it('rejects once the job is removed', async () => {
      const job = await t.queue.add('test', { foo: 'bar' })
      await job.remove()
      await differs.missingJob(name, job.updateData({ foo: 'baz' }), job.id as string, 'updateData')
    })

    it('a retried job resumes from the step its processor saved (fixed backoff)', async () => {
      const worker = t.worker(async (job) => {
        if (job.data.step === 'initial') await job.updateData({ step: 'second' })
        if (job.attemptsMade < 2) throw new Error('Not yet!')
        await job.updateData({ step: 'finish' })
        return 'finish'
      })
      const done = first<Job>()
      worker.on('completed', done.listener)
      const started = performance.now()
      const job = await t.queue.add('test', { step: 'initial' }, { attempts: 3, backoff: 200 })
      const completed = await done.value
      expect(performance.now() - started).toBeGreaterThan(400)
      expect(completed.returnvalue).toBe('finish')
      expect(completed.attemptsMade).toBe(3)
      expect((await t.queue.getJob(job.id as string))?.data).toEqual({ step: 'finish' })
    })
  })

  describe('changePriority', () => {
    it('priority 0 with lifo puts a waiting job at the head of wait', async () => {
      await t.queue.pause()
      await t.queue.add('test1', { foo: 'bar' })
      const job = await t.queue.add('test2', { foo: 'bar' }, { priority: 16 })
      expect(job.priority).toBe(16)
      await job.changePriority({ priority: 0, lifo: true })
      expect(job.priority).toBe(0)
      const names = completedNames(2)
      await t.queue.resume()
      expect(await names).toEqual(['test2', 'test1'])
    })

    it('priority 0 without lifo puts a prioritized job at the tail of wait', async () => {
      await t.queue.pause()
      const job = await t.queue.add('test1', { foo: 'bar' }, { priority: 8 })
      await t.queue.add('test2', { foo: 'bar' })
      await job.changePriority({ priority: 0, lifo: false })
      const names = completedNames(2)
      await t.queue.resume()
      expect(await names).toEqual(['test2', 'test1'])
    })

    it('a prioritized job runs by its new priority, and the processor sees it', async () => {
      await t.queue.add('test1', { foo: 'bar' }, { priority: 8 })
      const job = await t.queue.add('test2', { foo: 'bar' }, { priority: 16 })
      await job.changePriority({ priority: 1 })
      const seen: [string, number][] = []
      const completed = counted<[Job]>(2)
      t.worker((j) => {
        seen.push([j.name, j.priority])
      }).on('completed', completed.listener)
      await completed.done
      expect(seen).toEqual([
        ['test2', 1],
        ['test1', 8],
      ])
    })

    it('lifo puts a prioritized job ahead of the others of its priority', async () => {
      await t.queue.pause()
      await t.queue.add('test1', { foo: 'bar' }, { priority: 16 })
      const job = await t.queue.add('test2', { foo: 'bar' }, { priority: 16 })
      await job.changePriority({ priority: 16, lifo: true })
      const names = completedNames(2)
      await t.queue.resume()
      expect(await names).toEqual(['test2', 'test1'])
    })

    it('a paused queue runs by the new priority once resumed', async () => {
      await t.queue.pause()
      await t.queue.add('test1', { foo: 'bar' }, { priority: 8 })
      const job = await t.queue.add('test2', { foo: 'bar' }, { priority: 16 })
      await job.changePriority({ priority: 1 })
      const names = completedNames(2)
      await t.queue.resume()
      expect(await names).toEqual(['test2', 'test1'])
    })

    it('a delayed job stays delayed, with the new priority stored', async () => {
      const job = await t.queue.add('test1', { foo: 'bar' }, { delay: 60_000 })
      await job.changePriority({ priority: 10 })
      expect(await t.queue.getJobCountByTypes('prioritized')).toBe(0)
      expect(await job.isDelayed()).toBe(true)
      expect((await t.queue.getJob(job.id as string))?.priority).toBe(10)
    })

    it('rejects once the job is removed', async () => {
      const job = await t.queue.add('test', { foo: 'bar' })
      await job.remove()
      await differs.missingJob(name, job.changePriority({ priority: 2 }), job.id as string, 'changePriority')
    })

    it('a running job keeps running, with the new priority stored', async () => {
      const hold = gate()
      const running = first<Job>()
      t.worker(async (job) => {
        running.listener(job)
        await hold.passed
      })
      const job = await t.queue.add('test', {}, { priority: 7 })
      await running.value
      await job.changePriority({ priority: 3 })
      expect(await job.getState()).toBe('active')
      expect((await t.queue.getJob(job.id as string))?.priority).toBe(3)
      expect(await t.queue.getJobCountByTypes('prioritized')).toBe(0)
      hold.open()
    })
  })

  describe('moveToDelayed with DelayedError', () => {
    it('a step moved to delayed runs again later, without using an attempt', async () => {
      const { DelayedError } = t.lib
      const worker = t.worker(async (job, token) => {
        if (job.data.step === 'initial') {
          await job.moveToDelayed(Date.now() + 200, token)
          await job.updateData({ step: 'second' })
          throw new DelayedError()
        }
        await job.updateData({ step: 'finish' })
        return 'finish'
      })
      const done = first<Job>()
      worker.on('completed', done.listener)
      const failed = counted<[Job | undefined, Error]>(1)
      worker.on('failed', failed.listener)
      const started = performance.now()
      await t.queue.add('test', { step: 'initial' })
      const job = await done.value
      expect(performance.now() - started).toBeGreaterThan(200)
      expect(job.returnvalue).toBe('finish')
      expect(job.attemptsMade).toBe(1)
      expect(job.attemptsStarted).toBe(2)
      expect(failed.calls).toEqual([])
      expect(t.errors).toEqual([])
    })

    it('the job is delayed until the timestamp, and QueueEvents says delayed with it', async () => {
      const { DelayedError } = t.lib
      const events = await t.events()
      const delayed = first<{ jobId: string; delay: number }>()
      events.on('delayed', delayed.listener)
      const until = Date.now() + 60_000
      const moved = counted<[]>(1)
      t.worker(async (job, token) => {
        await job.moveToDelayed(until, token)
        moved.listener()
        throw new DelayedError()
      })
      const job = await t.queue.add('test', {})
      await moved.done
      expect(await delayed.value).toEqual({ jobId: job.id, delay: until })
      await waitFor(async () => (await t.queue.getJobState(job.id as string)) === 'delayed', { what: 'the job delayed' })
      expect(await t.queue.getJobCounts('active', 'delayed', 'completed', 'failed')).toEqual({
        active: 0,
        delayed: 1,
        completed: 0,
        failed: 0,
      })
    })

    it('close() resolves while jobs are being moved to delayed', async () => {
      const { DelayedError } = t.lib
      const started = counted<[]>(1)
      const worker = t.worker(async (job, token) => {
        started.listener()
        await job.moveToDelayed(Date.now(), token)
        throw new DelayedError()
      })
      await t.queue.addBulk(Array.from({ length: 50 }, (_, index) => ({ name: 'test', data: { index } })))
      await started.done
      await worker.close()
      expect(await worker.isRunning()).toBe(false)
      expect(await t.queue.getActiveCount()).toBe(0)
    })
  })

  describe('moveToDelayed refused', () => {
    it('with a token that does not hold the lock, and leaves the job running', async () => {
      const results = first<[unknown, string]>()
      t.worker(async (job) => {
        const refused = await job.moveToDelayed(Date.now() + 60_000, 'not-the-token').then(
          () => undefined,
          (e: unknown) => e,
        )
        results.listener([refused, await job.getState()])
      })
      const job = await t.queue.add('test', {})
      const [refused, state] = await results.value
      await differs.refused(name, Promise.reject(refused), `Lock mismatch for job ${job.id}. Cmd moveToDelayed from active`, {
        code: 'ERR_LOCK_LOST',
        mentions: String(job.id),
      })
      expect(state).toBe('active')
    })

    it('for a job that is not running', async () => {
      const job = await t.queue.add('test', {})
      // EchoMQ: a token given for a job not in flight holds no lease (docs/changing-jobs.md, ERR_LOCK_LOST).
      await differs.refused(name, job.moveToDelayed(Date.now() + 60_000, 'a-token'), `Missing lock for job ${job.id}. moveToDelayed`, {
        code: 'ERR_LOCK_LOST',
        mentions: String(job.id),
      })
      expect(await job.getState()).toBe('waiting')
    })
  })

  describe('extendLock', () => {
    it("extends the run's lease with its token (1), not with another (0)", async () => {
      const results = first<[number, number, string]>()
      t.worker(async (job, token) => {
        const own = await job.extendLock(token as string, 5_000)
        const other = await job.extendLock('not-the-token', 5_000)
        results.listener([own, other, await job.getState()])
      })
      await t.queue.add('test', {})
      const [own, other, state] = await results.value
      expect(own).toBe(1)
      expect(other).toBe(0)
      expect(state).toBe('active')
    })

    it("gives 0 once the run's job completed", async () => {
      const done = first<Job>()
      const tokens = first<string>()
      t.worker((_job, token) => tokens.listener(token as string)).on('completed', done.listener)
      await t.queue.add('test', {})
      const token = await tokens.value
      const job = await done.value
      expect(await job.extendLock(token, 5_000)).toBe(0)
      expect(await job.getState()).toBe('completed')
    })
  })
})
