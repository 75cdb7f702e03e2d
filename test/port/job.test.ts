/**
 * BullMQ's tests of a job's own methods (tests/job.test.ts: remove, updateProgress, log and clearLogs, promote,
 * getState, waitUntilFinished), ported: the cases job-updates.test.ts and delay.test.ts do not cover. They run
 * on LIBRARIES (adapter.ts). BullMQ's `Job.create(queue, ...)` is `queue.add` here (the same write), but for
 * the case about Job.create itself. Left out: what needs manual processing (`worker.getNextJob`, then
 * `moveToCompleted` / `moveToFailed` / `moveToWait` with a token: not in EchoMQ, docs/migrating-from-bullmq.md
 * "Left out"); BullMQ's getState case takes its job that way, here a worker runs it.
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { counted, differs, first, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

describe.each(LIBRARIES)('%s: a job and its methods', (name) => {
  const t = usePort(redis, name)
  const add = (data: unknown = { foo: 'bar' }, opts = {}) => t.queue.add('test', data, opts)
  const stored = (job: Job) => t.lib.Job.fromId(t.queue, job.id as string)

  it('Job.create saves the job, with its options', async () => {
    // differs.takesTimestamp: EchoMQ refuses `timestamp` (docs/migrating-from-bullmq-queue.md).
    const opts = differs.takesTimestamp(name) ? { timestamp: 1234567890 } : { attempts: 2 }
    const job = await t.lib.Job.create(t.queue, 'test', { foo: 'bar' }, opts)
    const storedJob = await stored(job)
    expect(storedJob?.id).toBe(job.id)
    expect(storedJob?.data.foo).toBe('bar')
    expect(storedJob?.opts).toMatchObject(opts)
  })

  it('remove() removes the job', async () => {
    const job = await add()
    await job.remove()
    expect(await stored(job)).toBeUndefined()
  })

  describe('updateProgress', () => {
    it.each([
      ['a number', 42],
      ['an object', { total: 120, completed: 40 }],
      ['a string', 'hello, world!'],
    ])('stores %s', async (_, progress) => {
      const job = await add()
      await job.updateProgress(progress)
      expect((await stored(job))?.progress).toEqual(progress)
    })

    it('stores a boolean', async () => {
      const job = await add()
      await job.updateProgress(false)
      expect((await stored(job))?.progress).toBe(false)
      await job.updateProgress(true)
      expect((await stored(job))?.progress).toBe(true)
    })

    it("through the Queue, with the queue's progress event", async () => {
      const job = await add()
      const progress = first<[string, unknown]>()
      t.queue.on('progress', (jobId: string, value: unknown) => progress.listener([jobId, value]))
      await t.queue.updateJobProgress(job.id as string, 42)
      expect(await progress.value).toEqual([job.id, 42])
      expect((await stored(job))?.progress).toBe(42)
      await t.queue.updateJobProgress(job.id as string, { total: 120, completed: 40 })
      expect((await stored(job))?.progress).toEqual({ total: 120, completed: 40 })
    })

    it('rejects once the job is removed', async () => {
      const job = await add()
      await job.remove()
      await differs.missingJob(name, job.updateProgress({ total: 120, completed: 40 }), job.id as string, 'updateProgress')
    })
  })

  describe('log', () => {
    it('keeps the rows in order, read either way, and removes them with the job', async () => {
      const job = await add()
      await job.log('some log text 1')
      await job.log('some log text 2')
      const id = job.id as string
      expect(await t.queue.getJobLogs(id)).toEqual({ logs: ['some log text 1', 'some log text 2'], count: 2 })
      expect(await t.queue.getJobLogs(id, 0, 0, true)).toEqual({ logs: ['some log text 1'], count: 2 })
      expect(await t.queue.getJobLogs(id, 1, 1)).toEqual({ logs: ['some log text 2'], count: 2 })
      expect(await t.queue.getJobLogs(id, 0, -1, false)).toEqual({ logs: ['some log text 2', 'some log text 1'], count: 2 })
      expect(await t.queue.getJobLogs(id, 0, 0, false)).toEqual({ logs: ['some log text 2'], count: 2 })
      expect(await t.queue.getJobLogs(id, 1, 1, false)).toEqual({ logs: ['some log text 1'], count: 2 })
      await job.remove()
      expect(await t.queue.getJobLogs(id)).toEqual({ logs: [], count: 0 })
    })

    it('keeps the newest keepLogs rows, and answers the count kept', async () => {
      const job = await add({ foo: 'bar' }, { keepLogs: 2 })
      const id = job.id as string
      expect(await job.log('some log text 1')).toBe(1)
      expect(await t.queue.getJobLogs(id)).toEqual({ logs: ['some log text 1'], count: 1 })
      expect(await job.log('some log text 2')).toBe(2)
      expect(await t.queue.getJobLogs(id)).toEqual({ logs: ['some log text 1', 'some log text 2'], count: 2 })
      expect(await job.log('some log text 3')).toBe(2)
      expect(await t.queue.getJobLogs(id)).toEqual({ logs: ['some log text 2', 'some log text 3'], count: 2 })
    })

    it('through the Queue (addJobLog)', async () => {
      const job = await add()
      await t.queue.addJobLog(job.id as string, 'some log text 1')
      await t.queue.addJobLog(job.id as string, 'some log text 2')
      expect(await t.queue.getJobLogs(job.id as string)).toEqual({ logs: ['some log text 1', 'some log text 2'], count: 2 })
    })

    it('rejects once the job is removed', async () => {
      const job = await add()
      await job.remove()
      await differs.missingJob(name, job.log('oneLog'), job.id as string, 'addLog')
    })
  })

  describe('clearLogs', () => {
    it('clears the log', async () => {
      const job = await add()
      await job.log('some log text 1')
      await job.log('some log text 2')
      await job.clearLogs()
      expect(await t.queue.getJobLogs(job.id as string)).toEqual({ logs: [], count: 0 })
    })

    it('keeps the newest rows asked for', async () => {
      const job = await add()
      const rows = ['some log text 1', 'some log text 2', 'some log text 3']
      for (const row of rows) await job.log(row)
      await job.clearLogs(4)
      expect(await t.queue.getJobLogs(job.id as string)).toEqual({ logs: rows, count: 3 })
      await job.clearLogs(3)
      expect(await t.queue.getJobLogs(job.id as string)).toEqual({ logs: rows, count: 3 })
      await job.clearLogs(2)
      expect(await t.queue.getJobLogs(job.id as string)).toEqual({ logs: rows.slice(1), count: 2 })
      await job.clearLogs(0)
      expect(await t.queue.getJobLogs(job.id as string)).toEqual({ logs: [], count: 0 })
    })
  })

  describe('promote in a paused queue', () => {
    it.each([
      ['behind a waiting job', 2],
      ['alone', 1],
    ])('moves the delayed job to wait (%s), where it stays once resumed', async (_, waiting) => {
      if (waiting === 2) await t.queue.add('normal', { foo: 'bar' })
      const delayed = await t.queue.add('delayed', { foo: 'bar' }, { delay: 100 })
      await t.queue.pause()
      await delayed.promote()
      expect(await t.queue.getWaitingCount()).toBe(waiting)
      await t.queue.resume()
      expect(await t.queue.getWaitingCount()).toBe(waiting)
      expect(await delayed.getState()).toBe('waiting')
    })
  })

  it('getState follows the job: delayed, waiting once promoted, failed; another completed', async () => {
    const job = await t.queue.add('job1', { foo: 'bar' }, { delay: 1000 })
    expect(await job.getState()).toBe('delayed')
    await t.queue.pause()
    await job.promote()
    await t.queue.resume()
    expect(await job.getState()).toBe('waiting')
    const ended = counted<[Job | undefined]>(2)
    const worker = t.worker((run) => {
      if (run.name === 'job1') throw new Error('test error')
      return 'succeeded'
    })
    worker.on('failed', ended.listener)
    worker.on('completed', ended.listener)
    const job2 = await t.queue.add('job2', { foo: 'foo' })
    await ended.done
    expect(await job.getState()).toBe('failed')
    expect(await job2.getState()).toBe('completed')
  })
  describe('waitUntilFinished', () => {
    it.each([
      ['a string', 'qux'],
      ['an object', { resultFoo: 'bar' }],
    ])('resolves to the result, %s', async (_, result) => {
      const events = await t.events()
      t.worker(() => result)
      const job = await add()
      expect(await job.waitUntilFinished(events)).toEqual(result)
    })

    it('resolves at once for a job already completed', async () => {
      const events = await t.events()
      const done = first<Job>()
      t.worker(() => ({ resultFoo: 'bar' })).on('completed', done.listener)
      const job = await add()
      await done.value
      expect(await job.waitUntilFinished(events)).toEqual({ resultFoo: 'bar' })
    })

    it('rejects with the error of a job that failed, before or after the call', async () => {
      const events = await t.events()
      const failed = first<Job | undefined>()
      t.worker(() => {
        throw new Error('test error')
      }).on('failed', failed.listener)
      const job = await add()
      await expect(job.waitUntilFinished(events)).rejects.toThrow('test error')
      await failed.value
      await expect(job.waitUntilFinished(events)).rejects.toThrow('test error')
    })

    it('rejects for a job removed on completion', async () => {
      const events = await t.events()
      const done = first<Job>()
      t.worker(() => 'qux').on('completed', done.listener)
      const job = await add({ foo: 'bar' }, { removeOnComplete: true })
      await done.value
      expect(await t.queue.getJob(job.id as string)).toBeUndefined()
      expect(await t.queue.getJobCounts('completed')).toEqual({ completed: 0 })
      const key = `${t.queue.qualifiedName}:${job.id}`
      await differs.refused(name, job.waitUntilFinished(events), `Missing key for job ${key}. isFinished`, {
        code: 'ERR_JOB_MISSING',
        mentions: `job ${job.id} `,
      })
    })
  })
})
