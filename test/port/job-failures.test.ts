/**
 * BullMQ's tests of a job's failure (tests/job.test.ts, `.moveToFailed`: the state it goes to by its attempts
 * and backoff, the stacktrace kept and its stackTraceLimit), ported. They run on LIBRARIES (adapter.ts).
 * BullMQ's cases take the job with `worker.getNextJob` and fail it with `job.moveToFailed(err, token)` (manual
 * processing, not in EchoMQ: docs/migrating-from-bullmq.md "Left out"); here the processor throws the error,
 * which is what a worker's run does with it. Left out: moveToFailed's `fetchNext` reply and its refusal for a
 * job not running (manual processing only).
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, first, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

class CustomError extends Error {}

describe.each(LIBRARIES)('%s: a failed job', (name) => {
  const t = usePort(redis, name)
  /** Adds a job with `opts`, fails its run with `err`; resolves once the worker reported it failed. */
  const failOnce = async (opts: Record<string, unknown>, err: Error = new Error('test error')) => {
    const failed = first<Job | undefined>()
    // Each case ends before a retry would run (none left, or a backoff longer than the case).
    const worker = t.worker(() => {
      throw err
    })
    worker.on('failed', failed.listener)
    const job = await t.queue.add('test', { foo: 'bar' }, opts)
    await failed.value
    return (await t.queue.getJob(job.id as string)) as Job
  }

  it.each([
    ['an Error', new Error('test error')],
    ['a custom error', new CustomError('test error')],
  ])('is failed, with the stack of %s', async (_, err) => {
    const job = await failOnce({}, err)
    expect(await job.isFailed()).toBe(true)
    expect(job.stacktrace).toHaveLength(1)
    expect(job.stacktrace?.[0]).toContain('job-failures.test.ts')
  })

  it('with attempts left and no backoff, goes back to wait and runs again', async () => {
    const events = await t.events()
    const retried = first<number>()
    t.worker((job) => {
      if (job.attemptsMade === 0) throw new Error('test error')
      retried.listener(job.attemptsMade)
    })
    const job = await t.queue.add('test', { foo: 'bar' }, { attempts: 3 })
    const waiting = first<{ jobId: string; prev?: string }>()
    events.on('waiting', (args) => args.jobId === job.id && args.prev === 'active' && waiting.listener(args))
    expect(await waiting.value).toMatchObject({ jobId: job.id, prev: 'active' })
    expect(await retried.value).toBe(1)
  })

  it("a retried attempt's reason is stored, and its failed event's job holds it and the stack", async () => {
    const failedRun = first<Job | undefined>()
    t.worker(() => {
      throw new Error('test error')
    }).on('failed', failedRun.listener)
    await t.queue.add('test', { foo: 'bar' }, { attempts: 3, backoff: 10_000 })
    const job = await failedRun.value
    expect(job?.failedReason).toBe('test error')
    expect(job?.stacktrace).toHaveLength(1)
    expect(job?.stacktrace?.[0]).toContain('job-failures.test.ts')
    expect((await t.queue.getJob(job?.id as string))?.failedReason).toBe('test error')
  })

  it('with its last attempt failed, is failed', async () => {
    const job = await failOnce({ attempts: 1 })
    expect(await job.getState()).toBe('failed')
    expect(await job.isFailed()).toBe(true)
    expect(job.stacktrace).toHaveLength(1)
  })

  it('with attempts left and a backoff, is delayed for its retry', async () => {
    const job = await failOnce({ attempts: 3, backoff: 10_000 })
    expect(await job.isFailed()).toBe(false)
    expect(await job.isDelayed()).toBe(true)
    expect(await job.getState()).toBe('delayed')
    expect(job.stacktrace).toHaveLength(1)
  })

  it.each([1, 0])('keeps at most stackTraceLimit (%i) stacks, the newest', async (stackTraceLimit) => {
    // A backoff holds the job delayed between its two runs, for the stack of the first to be read.
    const failed = counted<[Job | undefined]>(2)
    t.worker((job) => {
      throw new Error(job.attemptsMade === 0 ? 'failed once' : 'failed twice')
    }).on('failed', failed.listener)
    const job = await t.queue.add('test', { foo: 'bar' }, { stackTraceLimit, attempts: 2, backoff: 10_000 })
    await waitFor(async () => (await t.queue.getJob(job.id as string))?.attemptsMade === 1, { what: 'the first run failed' })
    const once = (await t.queue.getJob(job.id as string)) as Job
    expect(await once.isFailed()).toBe(false)
    expect(once.stacktrace).toHaveLength(stackTraceLimit)
    await once.promote()
    await failed.done
    const again = (await t.queue.getJob(job.id as string)) as Job
    expect(await again.isFailed()).toBe(true)
    expect(again.name).toBe(job.name)
    expect(again.stacktrace).toHaveLength(stackTraceLimit)
    if (stackTraceLimit === 1) {
      expect(once.stacktrace?.[0]).toContain('failed once')
      expect(again.stacktrace?.[0]).toContain('failed twice')
    }
  })

  it('saves the stack of the error', async () => {
    const job = await failOnce({})
    expect(job.stacktrace?.length).toBeGreaterThan(0)
  })
})
