/**
 * BullMQ's tests of a worker's lifecycle and a job's retry (tests/worker.test.ts: pausing, concurrency,
 * processedBy, job.retry, moveToWait, getNextJob's `active`; tests/events.test.ts: QueueEvents.run()),
 * ported: the cases found to differ when BullMQ's own tests were run on EchoMQ. They run on LIBRARIES.
 */
import { type Job, MetricsTime } from 'bullmq'
import { describe, expect, it } from 'vitest'
import * as echomq from '../../lib/index.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, first, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

/** A promise and the function that resolves it. */
function gate(): { open: () => void; opened: Promise<void> } {
  let open: () => void = () => undefined
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { open, opened }
}

it("EchoMQ's MetricsTime has BullMQ's names and values", () => {
  const bull = Object.fromEntries(Object.entries(MetricsTime).filter(([key]) => Number.isNaN(Number(key))))
  expect(echomq.MetricsTime).toEqual(bull)
})

describe.each(LIBRARIES)('%s: worker lifecycle and retries', (name) => {
  const t = usePort(redis, name)

  it('pause() emits paused once the running jobs ended; run() resolves then, and isRunning() is false', async () => {
    const release = gate()
    const running = counted<[string]>(2)
    const worker = t.worker(
      async (job: Job) => {
        running.listener(job.id as string)
        await release.opened
      },
      { autorun: false, concurrency: 2 },
    )
    await t.queue.addBulk([1, 2, 3].map((n) => ({ name: 'test', data: { n } })))
    const run = worker.run()
    await running.done
    const paused = first<[number]>()
    worker.on('paused', async () => paused.listener([await t.queue.getActiveCount()]))
    const pausing = worker.pause()
    expect(worker.isRunning()).toBe(true)
    release.open()
    await pausing
    expect(await paused.value).toEqual([0])
    await run
    expect(worker.isRunning()).toBe(false)
    expect(await t.queue.getJobCounts('wait', 'completed')).toEqual({ wait: 1, completed: 2 })
    worker.resume()
    expect(worker.isRunning()).toBe(true)
    await waitFor(async () => (await t.queue.getJobCounts('completed')).completed === 3, { what: 'the third job after resume' })
  })

  it('concurrency is read and set on the worker', async () => {
    const worker = t.worker(() => undefined, { concurrency: 3 })
    expect(worker.concurrency).toBe(3)
    worker.concurrency = 5
    expect(worker.concurrency).toBe(5)
  })

  it('raising concurrency lets more jobs run together (from the next job ended, in BullMQ)', async () => {
    const first2 = gate()
    const rest = gate()
    let now = 0
    let most = 0
    const started = counted<[number]>(6)
    const worker = t.worker(
      async (job: Job) => {
        now++
        most = Math.max(most, now)
        started.listener(now)
        await ((job.data as { i: number }).i < 2 ? first2.opened : rest.opened)
        now--
      },
      { concurrency: 2 },
    )
    await t.queue.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'test', data: { i } })))
    await waitFor(() => started.calls.length === 2, { what: 'two jobs running' })
    worker.concurrency = 6
    first2.open()
    await started.done
    expect(most).toBe(4)
    rest.open()
  })

  it("a worker made with BullMQ's metrics option runs jobs, and getMetrics counts them", async () => {
    const done = counted<[Job]>(2)
    t.worker(async () => 'ok', { metrics: { maxDataPoints: MetricsTime.TWO_WEEKS } }).on('completed', done.listener)
    await t.queue.addBulk([
      { name: 'a', data: {} },
      { name: 'b', data: {} },
    ])
    await done.done
    await waitFor(async () => (await t.queue.getMetrics('completed')).meta.count === 2, { what: 'two completed jobs counted' })
  })

  it('job.processedBy is the name of the worker that took it', async () => {
    const seen = first<string | undefined>()
    const worker = t.worker(async (job: Job) => seen.listener(job.processedBy), { name: 'foobar' })
    await t.queue.add('test', {})
    expect(await seen.value).toBe('foobar')
    expect(worker.opts.name).toBe('foobar')
  })

  it('job.retry() keeps attemptsMade, so a job that used its attempts runs once more, and clears the Job', async () => {
    let runs = 0
    const worker = t.worker(() => {
      runs++
      throw new Error('Not even!')
    })
    const failed = counted<[Job]>(2)
    worker.on('failed', (job) => failed.listener(job as Job))
    await t.queue.add('test', {}, { attempts: 1 })
    await waitFor(() => failed.calls.length === 1, { what: 'the first failure' })
    const job = failed.calls[0]?.[0] as Job
    await job.retry()
    expect([job.failedReason, job.processedOn, job.finishedOn, job.returnvalue]).toEqual([null, null, null, null])
    await failed.done
    const stored = await t.queue.getJob(job.id as string)
    expect(stored?.attemptsMade).toBe(2)
    expect(await stored?.getState()).toBe('failed')
    expect(runs).toBe(2)
  })

  it('getNextJob emits active; moveToWait puts the job back in line, no attempt used', async () => {
    const worker = t.worker(null as never)
    const active = first<Job>()
    worker.on('active', active.listener)
    await t.queue.add('test', { foo: 'bar' })
    const job = (await worker.getNextJob('my-token')) as Job
    expect((await active.value).id).toBe(job.id)
    await job.moveToWait('my-token')
    expect(await job.getState()).toBe('waiting')
    expect((await t.queue.getJob(job.id as string))?.attemptsMade).toBe(0)
  })

  it('a job stalled past maxStalledCount is failed, with a failed event on a worker', async () => {
    const started = first<Job>()
    const stuck = t.worker(() => new Promise(() => undefined), { stalledInterval: 100, maxStalledCount: 0 })
    stuck.on('active', started.listener)
    const job = await t.queue.add('test', { bar: 'baz' })
    await started.value
    // Gone without a word: its lease lapses (close(true) gives the running job up, its lease no longer renewed).
    await stuck.close(true)
    const failed = first<[Job, Error, string]>()
    const checker = t.worker(() => undefined, { stalledInterval: 100, maxStalledCount: 0 })
    checker.on('failed', (j, err, prev) => failed.listener([j as Job, err, prev as string]))
    const [failedJob, err, prev] = await failed.value
    expect(failedJob.id).toBe(job.id)
    expect(err.message).toBe('job stalled more than allowable limit')
    expect(prev).toBe('active')
    expect(await job.getState()).toBe('failed')
  })

  it('a stalled job run again holds its stalledCounter', async () => {
    const started = first<Job>()
    const stuck = t.worker(() => new Promise(() => undefined), { stalledInterval: 100 })
    stuck.on('active', started.listener)
    await t.queue.add('test', {})
    await started.value
    await stuck.close(true)
    const seen = first<[number, number]>()
    const checker = t.worker((job: Job) => job.stalledCounter, { stalledInterval: 100 })
    checker.on('completed', (job, result) => seen.listener([job.stalledCounter, result as number]))
    expect(await seen.value).toEqual([1, 1])
  })

  it('lifo jobs added while the queue is paused run newest first once it resumes', async () => {
    const seen: number[] = []
    const done = counted(4)
    // Made before the pause, not waited for: its first look at the line may come while the queue is paused.
    const worker = t.worker(async (job: Job) => void seen.push((job.data as { count: number }).count))
    worker.on('completed', done.listener)
    await t.queue.pause()
    for (let count = 1; count <= 4; count++) await t.queue.add('test', { count }, { lifo: true })
    await t.queue.resume()
    await done.done
    expect(seen).toEqual([4, 3, 2, 1])
  })

  it('QueueEvents.run() while it runs is refused', async () => {
    const events = new t.lib.QueueEvents(t.queueName, { connection: t.connection, autorun: false })
    try {
      const running = events.run()
      await expect(events.run()).rejects.toThrow('Queue Events is already running.')
      await events.close()
      await running
    } finally {
      await events.close()
    }
  })
})
