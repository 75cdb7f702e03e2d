/**
 * The Queue's and Job's BullMQ 6.7 names that EchoMQ lacked: job.opts on every Job, the Queue's own
 * events (QueueListener), remove() resolving to 1 or 0, Job.fromId, getPrioritized, getMetrics in
 * BullMQ's shape, updateJobProgress and addJobLog.
 */
import { describe, expect, it } from 'vitest'
import { Job, Queue } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

describe('job.opts', () => {
  it('is on the job add() resolves to, on getJob and getJobs, and on the job a processor is given, the same', async () => {
    const opts = {
      jobId: 'rich',
      attempts: 4,
      priority: 3,
      backoff: { type: 'exponential' as const, delay: 500 },
      removeOnComplete: { age: 3600, count: 50 },
      removeOnFail: 100,
      keepLogs: 7,
    }
    const added = await fx.queue.add('x', { n: 1 }, opts)
    const expected = {
      jobId: 'rich',
      attempts: 4,
      priority: 3,
      backoff: { type: 'exponential', delay: 500 },
      removeOnComplete: { age: 3600, count: 50 },
      removeOnFail: 100,
      keepLogs: 7,
      stackTraceLimit: 10,
      timestamp: added.timestamp,
    }
    expect(added.opts).toEqual(expected)
    expect((await fx.queue.getJob('rich'))?.opts).toEqual(expected)
    expect((await fx.queue.getPrioritized())[0]?.opts).toEqual(expected)
    const given = new Promise<Job>((resolve) => fx.worker((job) => resolve(job)))
    expect((await given).opts).toEqual(expected)
  })

  it('is whole on every job a busy worker runs, taken or read ahead into its hand', async () => {
    const seen: Job[] = []
    const w = fx.worker((job) => void seen.push(job), { concurrency: 2 })
    const jobs = Array.from({ length: 40 }, (_, i) => ({ name: 'x', data: { i }, opts: { priority: 2, keepLogs: 3, attempts: 2 } }))
    await fx.queue.addBulk(jobs)
    await waitFor(() => seen.length === 40, { what: 'the 40 jobs to run' })
    await w.close()
    for (const job of seen) {
      expect(job.opts).toEqual({
        attempts: 2,
        priority: 2,
        keepLogs: 3,
        removeOnComplete: { count: 1000, age: 86_400 },
        removeOnFail: { count: 10_000, age: 604_800 },
        stackTraceLimit: 10,
        timestamp: job.timestamp,
      })
      expect(job.priority).toBe(2)
    }
  })

  it('says delay and lifo when given, nothing for what was not, and no jobId for an id EchoMQ gave', async () => {
    const delayed = await fx.queue.add('x', {}, { delay: 60_000 })
    const lifo = await fx.queue.add('x', {}, { lifo: true })
    expect(delayed.opts).toMatchObject({ delay: 60_000 })
    expect(delayed.opts).not.toHaveProperty('jobId')
    expect((await fx.queue.getJob(delayed.id))?.opts).toEqual(delayed.opts)
    expect((await fx.queue.getJob(lifo.id))?.opts).toMatchObject({ lifo: true })
    const plain = await fx.queue.add('x', {}, { jobId: 'plain' })
    expect(Object.keys(plain.opts).sort()).toEqual([
      'attempts',
      'jobId',
      'removeOnComplete',
      'removeOnFail',
      'stackTraceLimit',
      'timestamp',
    ])
    // What it costs: a job with the defaults stores no option field.
    expect(Object.keys(await redis.client.hgetall(fx.keys.job('plain'))).sort()).toEqual(['createdOn', 'data', 'name', 'state'])
  })
})

describe("the Queue's own events", () => {
  it('waiting (add, addBulk), paused, resumed, removed, cleaned, progress: this instance\u2019s calls', async () => {
    const heard: [string, unknown][] = []
    const q = fx.queue
    q.on('waiting', (job) => heard.push(['waiting', job.id]))
    q.on('paused', () => heard.push(['paused', undefined]))
    q.on('resumed', () => heard.push(['resumed', undefined]))
    q.on('removed', (id) => heard.push(['removed', id]))
    q.on('cleaned', (ids, type) => heard.push(['cleaned', [ids, type]]))
    q.on('progress', (id, progress) => heard.push(['progress', [id, progress]]))
    await q.add('x', {}, { jobId: 'a' })
    await q.addBulk([{ name: 'x', data: {}, opts: { jobId: 'b' } }])
    await q.pause()
    await q.resume()
    await q.updateJobProgress('a', 50)
    expect(await q.remove('a')).toBe(1)
    const w = fx.worker(() => 'ok')
    await nextEvent(w, 'completed')
    await w.close()
    await q.clean(0, 0, 'completed')
    expect(heard).toEqual([
      ['waiting', 'a'],
      ['waiting', 'b'],
      ['paused', undefined],
      ['resumed', undefined],
      ['progress', ['a', 50]],
      ['removed', 'a'],
      ['cleaned', [['b'], 'completed']],
    ])
    expect((await q.getJob('b'))?.id).toBeUndefined()
  })

  it('error: the connection failing is told to an error listener (and to none when there is none)', async () => {
    // direct: a queue on a port where nothing listens, whose connection error is under test
    const q = new Queue('e', { connection: 'redis://127.0.0.1:1' })
    const err = await new Promise<Error>((resolve) => q.once('error', resolve))
    expect(err).toBeInstanceOf(Error)
    await q.close()
  })
})

describe('getters and helpers BullMQ has', () => {
  it('remove resolves 0 for a job in flight and leaves it; Job.fromId reads a job', async () => {
    let release = () => {}
    const held = new Promise<void>((r) => (release = r))
    const w = fx.worker(() => held)
    await fx.queue.add('x', {}, { jobId: 'busy' })
    await waitFor(async () => (await fx.queue.getJobState('busy')) === 'active', { what: 'the job to run' })
    expect(await fx.queue.remove('busy')).toBe(0)
    expect((await fx.queue.getJob('busy'))?.state).toBe('active')
    const fromId = await Job.fromId(fx.queue, 'busy')
    expect(fromId?.id).toBe('busy')
    expect(await Job.fromId(fx.queue, 'none')).toBeUndefined()
    release()
    await nextEvent(w, 'completed')
  })

  it('getPrioritized lists the jobs with a priority, in the order they will run; getWaiting the others', async () => {
    await fx.queue.add('x', {}, { jobId: 'low', priority: 9 })
    await fx.queue.add('x', {}, { jobId: 'high', priority: 1 })
    await fx.queue.add('x', {}, { jobId: 'plain' })
    expect((await fx.queue.getPrioritized()).map((j) => j.id)).toEqual(['high', 'low'])
    expect((await fx.queue.getWaiting()).map((j) => j.id)).toEqual(['plain'])
    expect(await fx.queue.getPrioritizedCount()).toBe(2)
    expect(await fx.queue.getWaitingChildren()).toEqual([])
    expect(await fx.queue.getRanges(['prioritized', 'waiting'], 0, -1, true)).toEqual(['high', 'low', 'plain'])
  })

  it('getJobSchedulersCount counts the schedulers', async () => {
    expect(await fx.queue.getJobSchedulersCount()).toBe(0)
    await fx.queue.upsertJobScheduler('a', { every: 60_000 })
    await fx.queue.upsertJobScheduler('b', { pattern: '0 9 * * *' })
    expect(await fx.queue.getJobSchedulersCount()).toBe(2)
  })

  it("getMetrics('completed' | 'failed') in BullMQ's shape, from the per-minute counts", async () => {
    const w = fx.worker((job) => {
      if (job.name === 'bad') throw new Error('no')
      return 'ok'
    })
    for (let i = 0; i < 3; i++) await fx.queue.add('ok', {})
    await fx.queue.add('bad', {}, { attempts: 1 })
    await waitFor(async () => (await fx.queue.getCompletedCount()) === 3 && (await fx.queue.getFailedCount()) === 1, {
      what: 'the jobs to finish',
    })
    await w.close()
    const completed = await fx.queue.getMetrics('completed')
    expect(completed.meta.count).toBe(3)
    expect(completed.meta.count - completed.meta.prevCount).toBeLessThanOrEqual(3)
    expect(completed.meta.prevTS % 60_000).toBe(0)
    expect(completed.count).toBe(59)
    expect(completed.data).toHaveLength(59)
    expect(completed.data.reduce((a, b) => a + b, 0)).toBe(completed.meta.prevCount)
    expect((await fx.queue.getMetrics('failed')).meta.count).toBe(1)
    expect((await fx.queue.getMetrics('completed', 0, 9)).data).toHaveLength(10)
  })

  it('addJobLog appends a line to a job', async () => {
    await fx.queue.add('x', {}, { jobId: 'logged' })
    expect(await fx.queue.addJobLog('logged', 'one')).toBe(1)
    expect((await fx.queue.getJobLogs('logged')).logs).toEqual(['one'])
  })
})
