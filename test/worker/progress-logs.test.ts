/**
 * Progress and logs from the processor: recorded, read back, fenced by the run's token (a run that lost
 * its job changes nothing and learns it), and deleted with the job; UnrecoverableError.
 */
import { describe, expect, it } from 'vitest'
import { type Job, UnrecoverableError } from '../../lib/index.js'
import { PROGRESS_MAX_BYTES } from '../../lib/queue/job-scope.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

describe('progress', () => {
  it('a processor reports progress: the Worker emits it, getJob reads the latest', async () => {
    const w = fx.worker(async (job: Job) => {
      await job.updateProgress(40)
      await job.updateProgress({ step: 'upload', percent: 80 })
      return 'ok'
    })
    const seen: unknown[] = []
    w.on('progress', (job: Job, progress: unknown) => seen.push([job.id, progress]))
    await fx.queue.add('x', {}, { jobId: 'p' })
    await waitFor(async () => (await fx.queue.getJob('p'))?.state === 'completed', { what: 'done' })

    expect(seen).toEqual([
      ['p', 40],
      ['p', { step: 'upload', percent: 80 }],
    ])
    expect((await fx.queue.getJob('p'))?.progress).toEqual({ step: 'upload', percent: 80 })
    expect((await fx.queue.add('x', {}, { jobId: 'fresh' })).progress).toBe(0)
  })

  it('a run that no longer owns its job changes nothing and gets ERR_LOCK_LOST', async () => {
    let kept: Job | undefined
    fx.worker((job: Job) => {
      kept = job
      return 'ok'
    })
    await fx.queue.add('x', {}, { jobId: 'done' })
    await waitFor(async () => (await fx.queue.getJob('done'))?.state === 'completed', { what: 'done' })

    await expect(kept?.updateProgress(99)).rejects.toMatchObject({ code: 'ERR_LOCK_LOST' })
    await expect(kept?.log('late line')).rejects.toMatchObject({ code: 'ERR_LOCK_LOST' })
    expect((await fx.queue.getJob('done'))?.progress).toBe(0)
    expect(await fx.queue.getJobLogs('done')).toEqual({ logs: [], count: 0 })
  })

  it('refuses progress JSON cannot hold, and a log line that is not text', async () => {
    const job = await fx.queue.add('x', {})
    await expect(job.updateProgress({ f: () => 1 } as never)).rejects.toMatchObject({ code: 'ERR_JOB_DATA' })
    await expect(job.log(42 as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    expect((await fx.queue.getJob(job.id))?.progress).toBe(0)
  })

  it("one progress limit: a Worker's job and a Queue's refuse the same size (PROGRESS_MAX_BYTES), accept one byte less", async () => {
    // The JSON of { s: n characters } is n + 8 bytes.
    const sized = (bytes: number) => ({ s: 'x'.repeat(bytes - 8) })
    const viaWorker: unknown[] = []
    fx.worker(async (job: Job) => {
      for (const bytes of [PROGRESS_MAX_BYTES + 1, PROGRESS_MAX_BYTES]) {
        viaWorker.push(
          await job.updateProgress(sized(bytes)).then(
            () => 'ok',
            (err: { code?: string }) => err.code,
          ),
        )
      }
    })
    await fx.queue.add('x', {}, { jobId: 'w' })
    await waitFor(async () => (await fx.queue.getJob('w'))?.state === 'completed', { what: 'done' })
    const job = await fx.queue.add('x', {}, { jobId: 'q', delay: 60_000 })
    const viaQueue: unknown[] = []
    for (const bytes of [PROGRESS_MAX_BYTES + 1, PROGRESS_MAX_BYTES]) {
      viaQueue.push(
        await job.updateProgress(sized(bytes)).then(
          () => 'ok',
          (err: { code?: string }) => err.code,
        ),
      )
    }
    await expect(fx.queue.updateJobProgress('q', sized(PROGRESS_MAX_BYTES + 1))).rejects.toMatchObject({ code: 'ERR_JOB_DATA' })

    expect(viaWorker).toEqual(['ERR_JOB_DATA', 'ok'])
    expect(viaQueue).toEqual(viaWorker)
    const stored = (await fx.queue.getJob('q'))?.progress as { s: string } | undefined
    expect(stored?.s.length).toBe(PROGRESS_MAX_BYTES - 8)
  })
})

describe('logs', () => {
  it('job.log resolves to the lines kept; keepLogs keeps the newest; getJobLogs pages both ways', async () => {
    const counts: number[] = []
    fx.worker(async (job: Job) => {
      for (const line of ['one', 'two', 'three']) counts.push(await job.log(line))
    })
    await fx.queue.add('x', {}, { jobId: 'all' })
    await fx.queue.add('x', {}, { jobId: 'two', keepLogs: 2 })
    await waitFor(async () => (await fx.queue.counts()).completed === 2, { what: 'both done' })

    expect(counts).toEqual([1, 2, 3, 1, 2, 2])
    expect(await fx.queue.getJobLogs('all')).toEqual({ logs: ['one', 'two', 'three'], count: 3 })
    expect(await fx.queue.getJobLogs('two')).toEqual({ logs: ['two', 'three'], count: 2 })
    expect(await fx.queue.getJobLogs('all', 0, 0)).toEqual({ logs: ['one'], count: 3 })
    expect(await fx.queue.getJobLogs('all', 0, -1, false)).toEqual({ logs: ['three', 'two', 'one'], count: 3 })
    expect(await fx.queue.getJobLogs('all', 1, 1, false)).toEqual({ logs: ['two'], count: 3 })
  })

  it('a job removed, or removed by its retention, takes its log with it', async () => {
    fx.worker(async (job: Job) => {
      await job.log('kept until the job goes')
    })
    await fx.queue.add('x', {}, { jobId: 'removed' })
    await fx.queue.add('x', {}, { jobId: 'retained', removeOnComplete: true })
    await waitFor(async () => (await fx.queue.getJob('removed'))?.state === 'completed', { what: 'done' })
    await waitFor(async () => (await fx.queue.getJob('retained')) === undefined, { what: 'removed at once' })
    await fx.queue.remove('removed')

    expect(await redis.client.exists(fx.keys.logs('removed'), fx.keys.logs('retained'))).toBe(0)
  })

  it('a job from getJob logs too, unfenced; a missing job is ERR_JOB_MISSING', async () => {
    const job = await fx.queue.add('x', {}, { jobId: 'q1' })
    expect(await job.log('from the producer')).toBe(1)
    await fx.queue.remove('q1')
    await expect(job.log('after')).rejects.toMatchObject({ code: 'ERR_JOB_MISSING' })
  })
})

describe('UnrecoverableError', () => {
  it('fails the job at once whatever attempts remain, using one attempt', async () => {
    const errors: Error[] = []
    const w = fx.worker((job: Job) => {
      if (job.attemptsMade === 0) throw new Error('transient')
      throw new UnrecoverableError('Unrecoverable')
    })
    w.on('failed', (_job: Job, err: Error) => errors.push(err))
    await fx.queue.add('x', {}, { jobId: 'u', attempts: 5 })
    await waitFor(async () => (await fx.queue.getJob('u'))?.state === 'failed', { what: 'failed' })

    expect(await fx.queue.getJob('u')).toMatchObject({ state: 'failed', attemptsMade: 2, failedReason: 'Unrecoverable' })
    expect(errors.map((e) => e.name)).toEqual(['Error', 'UnrecoverableError'])
  })
})
