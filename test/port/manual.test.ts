/**
 * BullMQ's manual processing (tests/job.test.ts: .moveToCompleted, .moveToFailed; tests/worker.test.ts:
 * getNextJob), ported: a Worker made with no processor, `worker.getNextJob(token)`, then
 * `job.moveToCompleted(value, token, fetchNext)` or `job.moveToFailed(err, token, fetchNext)`. They run on
 * LIBRARIES (adapter.ts). BullMQ's "0" token skips its lock check; EchoMQ's stands for the run's token the
 * Job was taken with (docs/migrating-from-bullmq.md, "Processing jobs by hand").
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { differs, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

describe.each(LIBRARIES)('%s: jobs processed by hand', (name) => {
  const t = usePort(redis, name)
  const token = 'my-token'
  const manual = () => t.worker(null as never)

  it('moveToCompleted marks the job as completed and returns the next job', async () => {
    const worker = manual()
    await t.lib.Job.create(t.queue, 'test', { foo: 'bar' })
    const job2 = await t.lib.Job.create(t.queue, 'test', { baz: 'qux' })
    const job1 = (await worker.getNextJob(token)) as Job
    expect(job1.token).toBe(token)
    expect(await job1.isCompleted()).toBe(false)
    expect(await job1.getState()).toBe('active')
    const next = (await job1.moveToCompleted('succeeded', token, true)) as unknown[]
    expect(await job1.isCompleted()).toBe(true)
    expect(job1.returnvalue).toBe('succeeded')
    expect(job1.finishedOn).toBeGreaterThan(0)
    expect(next[1]).toBe(job2.id)
    expect(await job2.getState()).toBe('active')
  })

  it('moveToFailed marks the job as failed, with its stack', async () => {
    const worker = manual()
    await t.lib.Job.create(t.queue, 'test', { foo: 'bar' })
    const job = (await worker.getNextJob(token)) as Job
    expect(await job.isFailed()).toBe(false)
    await job.moveToFailed(new Error('test error'), '0', true)
    expect(await job.isFailed()).toBe(true)
    expect(job.failedReason).toBe('test error')
    expect(job.stacktrace).toHaveLength(1)
    expect(job.stacktrace?.[0]).toContain('manual.test.ts')
    expect((await t.lib.Job.fromId(t.queue, job.id as string))?.failedReason).toBe('test error')
  })

  it('moveToFailed moves the job back to wait for a retry when attempts are left', async () => {
    const worker = manual()
    await t.lib.Job.create(t.queue, 'test', { foo: 'bar' }, { attempts: 3 })
    const job = (await worker.getNextJob(token)) as Job
    await job.moveToFailed(new Error('test error'), '0', false)
    expect(await job.isFailed()).toBe(false)
    expect(job.stacktrace).toHaveLength(1)
    expect(await job.isWaiting()).toBe(true)
    expect(job.attemptsMade).toBe(1)
  })

  it('moveToFailed with a backoff moves the job to delayed', async () => {
    const worker = manual()
    await t.lib.Job.create(t.queue, 'test', { foo: 'bar' }, { attempts: 3, backoff: 300 })
    const job = (await worker.getNextJob(token)) as Job
    await job.moveToFailed(new Error('test error'), token, true)
    expect(await job.getState()).toBe('delayed')
    expect(await job.isFailed()).toBe(false)
    expect(job.stacktrace).toHaveLength(1)
  })

  it('moveToFailed fails the job for good once its attempts are used', async () => {
    const worker = manual()
    await t.lib.Job.create(t.queue, 'test', { foo: 'bar' }, { attempts: 1 })
    const job = (await worker.getNextJob(token)) as Job
    await job.moveToFailed(new Error('test error'), '0', true)
    expect(await job.getState()).toBe('failed')
    expect(job.stacktrace).toHaveLength(1)
  })

  it('a job that is not in flight is not finished', async () => {
    const job = await t.lib.Job.create(t.queue, 'test', { foo: 'bar' }, { attempts: 3 })
    await differs.refused(
      name,
      job.moveToFailed(new Error('test error'), '0', true),
      `Job ${job.id} is not in the active state. retryJob`,
      {
        code: 'ERR_JOB_STATE',
        mentions: `job ${job.id} `,
      },
    )
    expect(await job.getState()).toBe('waiting')
  })

  it('a token that does not hold the job finishes nothing', async () => {
    const worker = manual()
    await t.lib.Job.create(t.queue, 'test', { foo: 'bar' })
    const job = (await worker.getNextJob(token)) as Job
    const err = (await job.moveToCompleted('x', 'another-token', false).then(
      () => undefined,
      (e: unknown) => e,
    )) as (Error & { code?: string }) | undefined
    expect(err).toBeInstanceOf(Error)
    if (name === 'bullmq') expect(err?.message).toMatch(/^Lock mismatch for job/)
    else expect(err?.code).toBe('ERR_LOCK_LOST')
    expect(await job.getState()).toBe('active')
    await job.moveToCompleted('x', token, false)
    expect(await job.getState()).toBe('completed')
  })

  it('extendLock takes the token the job was taken with', async () => {
    const worker = manual()
    await t.lib.Job.create(t.queue, 'test', {})
    const job = (await worker.getNextJob(token)) as Job
    expect(await job.extendLock(token, 5_000)).toBe(1)
    expect(await job.extendLock('another-token', 5_000)).toBe(0)
  })

  it('getNextJob without block resolves to undefined when no job is ready', async () => {
    const worker = manual()
    expect(await worker.getNextJob(token, { block: false })).toBeUndefined()
    await t.queue.add('test', {})
    expect((await worker.getNextJob(token, { block: false }))?.name).toBe('test')
  })

  it('the job fetchNext took is finished through Job.fromJSON with the same token', async () => {
    const worker = manual()
    await t.queue.addBulk([1, 2].map((n) => ({ name: 'test', data: { n } })))
    const first = (await worker.getNextJob(token)) as Job
    const [jobData, jobId] = (await first.moveToCompleted('one', token, true)) as [unknown, string]
    const next = t.lib.Job.fromJSON(worker as never, jobData as never, jobId)
    expect(next.data).toEqual({ n: 2 })
    await next.moveToCompleted('two', token, false)
    expect(await t.queue.getJobCounts('completed', 'active')).toEqual({ completed: 2, active: 0 })
  })

  it('a paused worker takes nothing by hand until resume()', async () => {
    const worker = manual()
    await t.queue.add('test', {})
    await worker.pause()
    expect(await worker.getNextJob(token, { block: false })).toBeUndefined()
    worker.resume()
    expect((await worker.getNextJob(token, { block: false }))?.name).toBe('test')
  })

  it('a worker with no processor takes nothing on its own, and run() is refused', async () => {
    const worker = manual()
    await t.queue.add('test', {})
    await worker.waitUntilReady()
    await expect(worker.run()).rejects.toThrow('No process function is defined.')
    expect(await t.queue.getJobCounts('wait', 'active')).toEqual({ wait: 1, active: 0 })
  })
})
