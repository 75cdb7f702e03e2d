/**
 * BullMQ's job cancellation (tests/job_cancellation.test.ts: worker.cancelJob, cancelAllJobs), ported: a
 * processor that takes the signal, `(job, token, signal)`, is aborted with the reason given, and what it
 * throws then fails the run as any throw does. They run on LIBRARIES (adapter.ts).
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, first, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

/** A processor that runs until its signal is aborted, then throws the signal's reason as its message. */
const untilCancelled = (_job: unknown, _token: unknown, signal?: AbortSignal) =>
  new Promise((_resolve, reject) => {
    signal?.addEventListener('abort', () => reject(new Error(`cancelled: ${String(signal.reason)}`)))
  })

describe.each(LIBRARIES)('%s: cancelling running jobs', (name) => {
  const t = usePort(redis, name)

  it('cancelJob aborts the run; what the processor throws fails the job', async () => {
    const worker = t.worker(untilCancelled as never)
    const active = first<Job>()
    const failed = first<[Job, Error]>()
    worker.on('active', active.listener)
    worker.on('failed', (job, err) => failed.listener([job as Job, err]))
    const job = await t.queue.add('test', { foo: 'bar' })
    await active.value
    // BullMQ emits `active` before its run takes a signal (its test waits 50 ms): until cancelJob finds the run.
    await waitFor(() => worker.cancelJob(job.id as string, 'user asked'))
    const [failedJob, err] = await failed.value
    expect(failedJob.id).toBe(job.id)
    expect(err.message).toBe('cancelled: user asked')
    expect(await job.getState()).toBe('failed')
  })

  it('cancelJob of a job this worker does not run is false', async () => {
    const worker = t.worker(untilCancelled as never)
    expect(worker.cancelJob('no-such-job')).toBe(false)
  })

  it('cancelAllJobs aborts every run of the worker', async () => {
    // The processors say they run (each has its signal by then, on both libraries).
    const running = counted<[string]>(3)
    const worker = t.worker(
      ((job: Job, token: string, signal: AbortSignal) => {
        running.listener(job.id as string)
        return untilCancelled(job, token, signal)
      }) as never,
      { concurrency: 3 },
    )
    const failed = counted<[Job, Error]>(3)
    worker.on('failed', (job, err) => failed.listener(job as Job, err))
    await t.queue.addBulk([1, 2, 3].map((n) => ({ name: 'test', data: { n } })))
    await running.done
    worker.cancelAllJobs('shutting down')
    const ended = await failed.done
    expect(ended.map(([, err]) => err.message)).toEqual(Array(3).fill('cancelled: shutting down'))
  })
})
