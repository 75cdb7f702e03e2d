/**
 * Pausing a queue: every worker on every host stops taking jobs at once (running ones finish, nothing is
 * returned or lost), while adds, delayed promotions and the sweep's recoveries go on and wait for resume.
 */
import { describe, expect, it } from 'vitest'
import { type Job, Queue, sweep } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

describe('pause and resume', () => {
  it('no worker takes a job while paused; a running job finishes; resume lets them all run', async () => {
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    const started: string[] = []
    const processor = async (job: Job) => {
      started.push(job.id)
      if (job.id === 'running') await gate
    }
    // Two workers, each on its own connections, as on two hosts.
    fx.worker(processor, { concurrency: 4 })
    fx.worker(processor, { concurrency: 4 })
    await fx.queue.add('x', {}, { jobId: 'running' })
    await waitFor(() => started.includes('running'), { what: 'the first job running' })

    await fx.queue.pause()
    expect(await fx.queue.isPaused()).toBe(true)
    for (let i = 0; i < 10; i++) await fx.queue.add('x', {}, { jobId: `held${i}` })
    release()
    await waitFor(async () => (await fx.queue.getJob('running'))?.state === 'completed', { what: 'the running job to finish' })
    // A window, not a synchronisation: nothing may start in it.
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(started).toEqual(['running'])
    // BullMQ 6.7: a paused queue's jobs are waiting ('paused' is BullMQ 5's list, empty since).
    expect(await fx.queue.getJobCounts('waiting', 'paused', 'active')).toEqual({ waiting: 10, paused: 0, active: 0 })
    expect(await fx.queue.getJobCountByTypes('waiting', 'paused')).toBe(10)
    expect(await fx.queue.getWaitingCount()).toBe(10)
    expect(await fx.queue.count()).toBe(10)
    expect(await fx.queue.getJobs('paused')).toEqual([])
    expect(await fx.queue.getWaiting()).toHaveLength(10)

    await fx.queue.resume()
    expect(await fx.queue.isPaused()).toBe(false)
    await waitFor(() => started.length === 11, { what: 'every held job to run' })
  })

  it('while paused, delayed jobs are still promoted and stalled jobs still recovered, into wait', async () => {
    await crashedJobs(redis.client, 'q', 2)
    await fx.queue.pause()
    await fx.queue.add('x', {}, { jobId: 'due', delay: 50 })
    const w = fx.worker(() => 'ok')
    await sweep(redis.client, 'q', { graceMs: 0 })
    const second = await sweep(redis.client, 'q', { graceMs: 0 })
    await waitFor(async () => (await fx.queue.getJob('due'))?.state === 'wait', { what: 'the delayed job promoted' })

    expect(second.recovered).toHaveLength(2)
    expect(await fx.queue.counts()).toMatchObject({ wait: 3, active: 0, delayed: 0 })
    await w.close()
  })

  it('a busy worker reserves nothing while paused; what it held goes back to wait', async () => {
    const w = fx.worker(() => undefined, { concurrency: 2 })
    await fx.queue.addBulk(Array.from({ length: 400 }, (_, i) => ({ name: 'x', data: { i } })))
    await waitFor(async () => (await fx.queue.counts()).completed > 20, { what: 'the worker to be busy' })
    await fx.queue.pause()
    await waitFor(async () => (await redis.client.zcard(fx.keys.reserved)) === 0 && (await fx.queue.counts()).active === 0, {
      what: 'reservations back in wait',
    })
    const counts = await fx.queue.counts()
    expect(counts.wait + counts.completed).toBe(400)
    await fx.queue.resume()
    await waitFor(async () => (await fx.queue.counts()).completed === 400, { what: 'all done after resume' })
    await w.close()
  })

  it('a queue paused from another Queue object is paused for this one', async () => {
    // direct: another Queue object of the same queue, which is under test
    const other = new Queue('q', { connection: redis.client })
    await other.pause()
    expect(await fx.queue.isPaused()).toBe(true)
    await fx.queue.resume()
    expect(await other.isPaused()).toBe(false)
  })
})
