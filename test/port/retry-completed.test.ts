/**
 * BullMQ's tests that retry completed jobs (tests/worker.test.ts: "when job is in completed state", "when
 * queue is paused and retry a job", the refusal of `retry('completed')` on a failed job in "should only retry a
 * job once after it has reached the max attempts"; tests/queue.test.ts: "when completed state is provided"),
 * ported. They run on LIBRARIES (adapter.ts). A flow's completed child retried is in flow-retry.test.ts.
 * Where BullMQ's case lets the worker run the retried jobs while it counts them, a gate holds them here.
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, differs, first, gate, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

describe.each(LIBRARIES)('%s: retrying a completed job', (name) => {
  const t = usePort(redis, name)

  /** A worker returning 1, then 2 once `completedOnce`; its completions (job, result) counted. */
  const twice = () => {
    let completedOnce = false
    const worker = t.worker(() => (completedOnce ? 2 : 1))
    const completions = counted<[Job, unknown]>(2)
    worker.on('completed', (job, result) => {
      completedOnce = true
      completions.listener(job as Job, result)
    })
    return completions
  }

  it('retries a job that completes: it runs again, attemptsStarted and attemptsMade 2', async () => {
    const completions = twice()
    const job = await t.queue.add('test', { foo: 'bar' })
    await waitFor(() => completions.calls.length === 1, { what: 'the first completion' })
    const [done, result] = completions.calls[0] as [Job, unknown]
    expect([done.data.foo, done.attemptsStarted, done.attemptsMade, result]).toEqual(['bar', 1, 1, 1])
    await job.retry('completed')
    const [again, result2] = (await completions.done)[1] as [Job, unknown]
    expect([again.data.foo, again.attemptsStarted, again.attemptsMade, result2]).toEqual(['bar', 2, 2, 2])
  })

  it('resetAttemptsMade and resetAttemptsStarted: BullMQ counts from 1 again; EchoMQ refuses resetAttemptsStarted', async () => {
    const completions = twice()
    const job = await t.queue.add('test', { foo: 'bar' })
    await waitFor(() => completions.calls.length === 1, { what: 'the first completion' })
    const both = job.retry('completed', { resetAttemptsMade: true, resetAttemptsStarted: true })
    if (differs.resetsAttemptsStarted(name)) await both
    else {
      await differs.refused(name, both, '', { code: 'ERR_OPTIONS', mentions: 'resetAttemptsStarted' })
      await job.retry('completed', { resetAttemptsMade: true })
    }
    const [again, result] = (await completions.done)[1] as [Job, unknown]
    expect([again.attemptsMade, result]).toEqual([1, 2])
    expect(again.attemptsStarted).toBe(differs.resetsAttemptsStarted(name) ? 1 : 2)
  })

  it('the job retried is left as BullMQ leaves it, and `waiting` is emitted with prev completed', async () => {
    const events = await t.events()
    const waiting = first<{ jobId: string; prev?: string }>()
    events.on('waiting', (args) => args.prev === 'completed' && waiting.listener(args))
    const worker = t.worker(() => 'result')
    const completed = first<unknown>()
    worker.on('completed', completed.listener)
    const added = await t.queue.add('test', {})
    await completed.value
    await worker.close()
    const job = (await t.queue.getJob(added.id as string)) as Job
    expect(job.returnvalue).toBe('result')
    await job.retry('completed')
    expect([job.returnvalue, job.finishedOn, job.processedOn, job.failedReason]).toEqual([null, null, null, null])
    expect(await waiting.value).toEqual({ jobId: job.id, prev: 'completed' })
    const stored = (await t.queue.getJob(job.id as string)) as Job
    expect(await stored.getState()).toBe('waiting')
    expect([stored.returnvalue, stored.finishedOn, stored.processedOn, stored.attemptsMade]).toEqual([null, undefined, undefined, 1])
  })

  it('a job retried on a paused queue moves to wait', async () => {
    const worker = t.worker(() => undefined)
    const completed = first<Job>()
    worker.on('completed', (job) => completed.listener(job as Job))
    const job = await t.queue.add('test', { foo: 'bar' })
    expect((await completed.value).data.foo).toBe('bar')
    await t.queue.pause()
    await job.retry('completed')
    expect(await t.queue.getWaitingCount()).toBe(1)
  })

  it('a job failed for good is not in the completed state: its retry("completed") is refused', async () => {
    let attempts = 0
    const worker = t.worker(() => {
      if (attempts < 3) {
        attempts++
        throw new Error('failed')
      }
    })
    const failedThrice = first<undefined>()
    worker.on('failed', async (job) => {
      if (job?.attemptsMade === 2) await job.retry()
      if (job?.attemptsMade === 3) failedThrice.listener(undefined)
    })
    const retriedJob = await t.queue.add('test', { foo: 'bar' }, { attempts: 2 })
    await failedThrice.value
    expect(await t.queue.getFailedCount()).toBe(1)
    await differs.refused(name, retriedJob.retry('completed'), `Job ${retriedJob.id} is not in the completed state. reprocessJob`, {
      code: 'ERR_JOB_STATE',
      mentions: `job ${retriedJob.id} `,
    })
    expect(await t.queue.getCompletedCount()).toBe(0)
  })

  it('retryJobs({ count: 2, state: "completed" }) retries all completed jobs', async () => {
    const jobCount = 8
    let round = 1
    const hold = gate()
    const worker = t.worker(async () => {
      if (round === 2) await hold.passed
    })
    const completing1 = counted(jobCount)
    worker.on('completed', completing1.listener)
    await t.queue.addBulk(Array.from({ length: jobCount }, (_, idx) => ({ name: 'test', data: { idx } })))
    await completing1.done
    expect((await t.queue.getJobCounts('completed')).completed).toBe(jobCount)

    round = 2
    const completing2 = counted(jobCount)
    worker.on('completed', completing2.listener)
    await t.queue.retryJobs({ count: 2, state: 'completed' })
    expect((await t.queue.getJobCounts('completed')).completed).toBe(0)
    hold.open()
    await completing2.done
    expect((await t.queue.getJobCounts('completed')).completed).toBe(jobCount)
  })
})
