/**
 * BullMQ's tests of deduplication's `keepLastIfActive` (tests/deduplication.test.ts, "when keepLastIfActive is
 * true"), ported, run on BullMQ 6.7 and on EchoMQ: an add whose id is held by a running job is kept as the
 * id's next job (the latest such add wins), added when the holder ends for good. Where BullMQ's processors
 * hold the first job with a fixed sleep while the case adds more, these hold it at a gate the case opens.
 */
import type { Job, Queue } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { first, gate, LIBRARIES, settled, until, usePort } from './adapter.js'

const redis = useRedis()

const keepLast = (id: string, more: Record<string, unknown> = {}) => ({ deduplication: { id, keepLastIfActive: true, ...more } })

describe.each(LIBRARIES)('%s: deduplication with keepLastIfActive', (name) => {
  const t = usePort(redis, name)

  /**
   * A worker whose first job waits at a gate (the case adds while it runs); each job's data is recorded as it
   * ends. `started` resolves when the first job is running.
   */
  function holding(options: Record<string, unknown> = {}, fail: (job: Job) => boolean = () => false) {
    const held = gate()
    const started = first<Job>()
    const processed: unknown[] = []
    const completed: Job[] = []
    const worker = t.worker(async (job: Job) => {
      if (processed.length === 0 && completed.length === 0) {
        started.listener(job)
        await held.passed
      }
      processed.push(job.data)
      if (fail(job)) throw new Error('intentional failure')
    }, options)
    worker.on('completed', (job: Job) => completed.push(job))
    return { held, started: started.value, processed, completed, worker }
  }

  const completedCount = (jobs: Job[], n: number) => waitFor(() => jobs.length >= n, { what: `${n} jobs completed` })

  it('stores the next job while the holder runs and adds it when the holder completes', async () => {
    const w = holding()
    const job1 = await t.queue.add('test', { seq: 1 }, keepLast('d1'))
    await w.started
    const job2 = await t.queue.add('test', { seq: 2 }, keepLast('d1'))
    expect(job2.id).toBe(job1.id)
    w.held.open()
    await completedCount(w.completed, 2)
    expect(w.processed).toEqual([{ seq: 1 }, { seq: 2 }])
  })

  it('still deduplicates when the holder waits (not active)', async () => {
    const events = await t.events()
    const deduplicated: { jobId: string }[] = []
    events.on('deduplicated', (payload) => deduplicated.push(payload))
    const job1 = await t.queue.add('test', { seq: 1 }, keepLast('d2'))
    const job2 = await t.queue.add('test', { seq: 2 }, keepLast('d2'))
    expect(job2.id).toBe(job1.id)
    expect(await t.queue.getWaitingCount()).toBe(1)
    await settled(events, t.queue)
    expect(deduplicated.filter((d) => d.jobId === job1.id)).toHaveLength(1)
  })

  it('keeps the latest of several adds made while the holder runs', async () => {
    const w = holding()
    await t.queue.add('test', { seq: 1 }, keepLast('d3'))
    await w.started
    await t.queue.add('test', { seq: 2 }, keepLast('d3'))
    await t.queue.add('test', { seq: 3 }, keepLast('d3'))
    w.held.open()
    await completedCount(w.completed, 2)
    expect(w.processed).toEqual([{ seq: 1 }, { seq: 3 }])
    expect(await t.queue.getJobCountByTypes('waiting', 'delayed', 'active')).toBe(0)
  })

  it('never runs two jobs of one id at once, at concurrency 5', async () => {
    let active = 0
    let most = 0
    const held = gate()
    const started = first<void>()
    const completed: Job[] = []
    t.worker(
      async () => {
        active++
        most = Math.max(most, active)
        started.listener(undefined)
        await held.passed
        active--
      },
      { concurrency: 5 },
    ).on('completed', (job: Job) => completed.push(job))
    await t.queue.add('test', { seq: 1 }, keepLast('d4'))
    await started.value
    await t.queue.add('test', { seq: 2 }, keepLast('d4'))
    held.open()
    await completedCount(completed, 2)
    expect(most).toBe(1)
  })

  it('after both jobs complete, the next add holds the id again and runs', async () => {
    const w = holding()
    await t.queue.add('test', { seq: 1 }, keepLast('d5'))
    await w.started
    await t.queue.add('test', { seq: 2 }, keepLast('d5'))
    w.held.open()
    await completedCount(w.completed, 2)
    const job3 = await t.queue.add('test', { seq: 3 }, keepLast('d5'))
    await completedCount(w.completed, 3)
    expect(w.completed[2]?.id).toBe(job3.id)
    expect(w.processed).toEqual([{ seq: 1 }, { seq: 2 }, { seq: 3 }])
  })

  it('works with a ttl option', async () => {
    const w = holding()
    await t.queue.add('test', { seq: 1 }, keepLast('d6', { ttl: 10_000 }))
    await w.started
    await t.queue.add('test', { seq: 2 }, keepLast('d6', { ttl: 10_000 }))
    w.held.open()
    await completedCount(w.completed, 2)
    expect(w.processed).toEqual([{ seq: 1 }, { seq: 2 }])
  })

  it('a next job added while the queue is paused waits for resume', async () => {
    const w = holding()
    const job1 = await t.queue.add('test', { seq: 1 }, keepLast('d7'))
    await w.started
    await t.queue.pause()
    await t.queue.add('test', { seq: 2 }, keepLast('d7'))
    w.held.open()
    await completedCount(w.completed, 1)
    // The next job holds the id once the holder completed; paused, it does not run.
    const next = await waitFor(async () => {
      const holder = await t.queue.getDeduplicationJobId('d7')
      return holder !== null && holder !== job1.id && holder
    })
    expect((await t.queue.getJob(next))?.data).toEqual({ seq: 2 })
    expect(w.processed).toEqual([{ seq: 1 }])
    await t.queue.resume()
    await completedCount(w.completed, 2)
    expect(w.processed).toEqual([{ seq: 1 }, { seq: 2 }])
  })

  it('takes a delay, its own or the queue default', async () => {
    const job = await t.queue.add('test', { seq: 1 }, { ...keepLast('d8'), delay: 5_000 })
    expect(await job.getState()).toBe('delayed')
    // direct: a second Queue of the same library with a default delay
    const withDelay = new t.lib.Queue(t.queueName, { connection: t.connection, defaultJobOptions: { delay: 5_000 } }) as Queue
    try {
      const other = await withDelay.add('test', { seq: 1 }, keepLast('d9'))
      expect(await other.getState()).toBe('delayed')
    } finally {
      await withDelay.close()
    }
  })

  it('a next job with a delay waits it out from when the holder completes', async () => {
    const w = holding()
    await t.queue.add('test', { seq: 1 }, { ...keepLast('d10'), delay: 100 })
    await w.started
    await t.queue.add('test', { seq: 2 }, { ...keepLast('d10'), delay: 100 })
    w.held.open()
    await completedCount(w.completed, 1)
    const next = await waitFor(async () => {
      const holder = await t.queue.getDeduplicationJobId('d10')
      return holder !== null && holder !== w.completed[0]?.id && holder
    })
    expect(['delayed', 'waiting', 'active', 'completed']).toContain(await t.queue.getJobState(next))
    await completedCount(w.completed, 2)
    expect(w.processed).toEqual([{ seq: 1 }, { seq: 2 }])
  })

  it('adds the next job when the holder fails for good', async () => {
    const failed = first<Job | undefined>()
    const w = holding({}, (job) => (job.data as { seq: number }).seq === 1)
    w.worker.on('failed', failed.listener)
    const job1 = await t.queue.add('test', { seq: 1 }, { ...keepLast('d11'), attempts: 1 })
    await w.started
    const job2 = await t.queue.add('test', { seq: 2 }, keepLast('d11'))
    expect(job2.id).toBe(job1.id)
    w.held.open()
    expect((await failed.value)?.id).toBe(job1.id)
    await completedCount(w.completed, 1)
    expect(w.processed).toEqual([{ seq: 1 }, { seq: 2 }])
  })

  it('adds the next job only once the holder used its last attempt', async () => {
    const events = await t.events()
    const exhausted = first<{ jobId: string }>()
    events.on('retries-exhausted', exhausted.listener)
    let attempts = 0
    const w = holding({}, (job) => {
      if ((job.data as { seq: number }).seq !== 1) return false
      attempts++
      return true
    })
    await t.queue.add('test', { seq: 1 }, { ...keepLast('d12'), attempts: 3, backoff: { type: 'fixed', delay: 50 } })
    await w.started
    await t.queue.add('test', { seq: 2 }, keepLast('d12'))
    w.held.open()
    await exhausted.value
    await completedCount(w.completed, 1)
    expect(attempts).toBe(3)
    expect(w.completed.map((job) => job.data)).toEqual([{ seq: 2 }])
  })

  it('a hold with a ttl that runs out while the holder runs still keeps the next add', async () => {
    const w = holding()
    const since = performance.now()
    const job1 = await t.queue.add('test', { seq: 1 }, keepLast('d13', { ttl: 200 }))
    await w.started
    // Past the ttl: the hold has none with keepLastIfActive.
    await until(since, 300)
    const job2 = await t.queue.add('test', { seq: 2 }, keepLast('d13', { ttl: 200 }))
    expect(job2.id).toBe(job1.id)
    w.held.open()
    await completedCount(w.completed, 2)
    expect(w.processed).toEqual([{ seq: 1 }, { seq: 2 }])
  })

  it('the next job keeps the custom jobId its add gave', async () => {
    const w = holding()
    await t.queue.add('test', { seq: 1 }, { ...keepLast('d14'), jobId: 'my-custom-uuid-1' })
    await w.started
    await t.queue.add('test', { seq: 2 }, { ...keepLast('d14'), jobId: 'my-custom-uuid-2' })
    w.held.open()
    await completedCount(w.completed, 2)
    expect(w.completed.map((job) => [job.id, job.data])).toEqual([
      ['my-custom-uuid-1', { seq: 1 }],
      ['my-custom-uuid-2', { seq: 2 }],
    ])
  })
})
