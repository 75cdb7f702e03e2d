/**
 * Priorities (BullMQ's order: no priority first, then 1 .. 2^21 - 1, equals in the order added; lifo),
 * kept through a recovery, a close and a retry; and the rate limit: at most `max` starts in any window of
 * `duration` across every worker, a limited worker asking Redis nothing while it waits, queue.rateLimit
 * and Worker.RateLimitError.
 */
import { describe, expect, it } from 'vitest'
import { type Job, sweep, Worker } from '../../lib/index.js'
import { countingClient } from '../helpers/counting.js'
import { useQueue } from '../helpers/fixture.js'
import { holdJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

/** The order one worker at concurrency 1 runs the queue's jobs in, once started. */
async function runOrder(expected: number): Promise<string[]> {
  const order: string[] = []
  fx.worker((job: Job) => void order.push(job.id))
  await waitFor(() => order.length === expected, { what: `${expected} jobs run` })
  return order
}

describe('priorities', () => {
  it('jobs without a priority first, then by priority, equals in the order added; lifo to the front', async () => {
    await fx.queue.add('x', {}, { jobId: 'p3', priority: 3 })
    await fx.queue.add('x', {}, { jobId: 'p1a', priority: 1 })
    await fx.queue.add('x', {}, { jobId: 'n1' })
    await fx.queue.add('x', {}, { jobId: 'p1b', priority: 1 })
    await fx.queue.add('x', {}, { jobId: 'n2' })
    await fx.queue.add('x', {}, { jobId: 'lifo', lifo: true })
    await fx.queue.add('x', {}, { jobId: 'p2', priority: 2 })

    // Each job counted once: three without a priority wait, four with one are prioritized.
    expect(await fx.queue.counts()).toMatchObject({ wait: 3, prioritized: 4 })
    expect((await fx.queue.getJobs('prioritized')).map((j) => j.id)).toEqual(['p3', 'p2', 'p1b', 'p1a'])
    expect((await fx.queue.getJobs('prioritized', 0, -1, true)).map((j) => j.id)).toEqual(['p1a', 'p1b', 'p2', 'p3'])
    expect(await fx.queue.getJob('p2')).toMatchObject({ state: 'prioritized', priority: 2 })
    expect(await runOrder(7)).toEqual(['lifo', 'n1', 'n2', 'p1a', 'p1b', 'p2', 'p3'])
  })

  it('a stalled job recovered by the sweep, a job a closing worker returns and a retry keep their priority', async () => {
    await fx.queue.add('x', {}, { jobId: 'st', priority: 5, attempts: 3 })
    await holdJobs(redis.client, 'q', 1, { leaseMs: 1 })
    await waitFor(async () => (await redis.client.exists(fx.keys.lock('st'))) === 0, { what: 'the lease to lapse' })
    await sweep(redis.client, 'q', { graceMs: 0 })
    await sweep(redis.client, 'q', { graceMs: 0 })
    expect(await fx.queue.getJob('st')).toMatchObject({ state: 'prioritized', attemptsMade: 0, stalledCounter: 1 })

    const closing = fx.worker(
      (_job, _token, signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      {
        closeTimeout: 50,
      },
    )
    await waitFor(async () => (await fx.queue.getJob('st'))?.state === 'active', { what: 'taken again' })
    await closing.close()
    expect(await fx.queue.getJob('st')).toMatchObject({ state: 'prioritized', attemptsMade: 0 })

    await fx.queue.add('x', {}, { jobId: 'later', priority: 9 })
    let runs = 0
    fx.worker((job: Job) => {
      if (job.id === 'st' && runs++ === 0) throw new Error('once')
    })
    await waitFor(async () => (await fx.queue.counts()).completed === 2, { what: 'both done' })
    const [a, b] = await Promise.all([fx.queue.getJob('st'), fx.queue.getJob('later')])
    // The retry (no backoff) went back behind its equals, still ahead of priority 9.
    expect(a?.finishedOn).toBeLessThanOrEqual(b?.processedOn as number)
  })

  it('reservations taken from the prioritized set go back to their place when unused', async () => {
    const w = fx.worker(() => undefined, { concurrency: 2 })
    await fx.queue.addBulk(Array.from({ length: 300 }, (_, i) => ({ name: 'x', data: {}, opts: { priority: 1 + (i % 3) } })))
    await waitFor(async () => (await fx.queue.counts()).completed > 30, { what: 'the worker busy on prioritized jobs' })
    await fx.queue.pause()
    await waitFor(async () => (await redis.client.zcard(fx.keys.reserved)) === 0 && (await fx.queue.counts()).active === 0, {
      what: 'reservations handed back',
    })
    const counts = await fx.queue.counts()
    expect(counts.prioritized + counts.completed).toBe(300)
    expect(await redis.client.hlen(fx.keys.reservedScores)).toBe(0)
    expect(await redis.client.llen(fx.keys.wait)).toBe(0)
    await fx.queue.resume()
    await waitFor(async () => (await fx.queue.counts()).completed === 300, { what: 'all done' })
    await w.close()
  })

  it('getCountsPerPriority answers with Redis out of memory (its MULTI refused, the reads pipelined)', async () => {
    await fx.queue.addBulk([0, 1, 1].map((priority) => ({ name: 'x', data: {}, opts: { priority } })))
    await redis.client.config('SET', 'maxmemory', '1')
    try {
      expect(await fx.queue.getCountsPerPriority([0, 1])).toEqual({ '0': 1, '1': 2 })
    } finally {
      await redis.client.config('SET', 'maxmemory', '0')
    }
  })

  it('getCountsPerPriority and promoteJobs refuse bad input with ERR_OPTIONS', async () => {
    for (const priorities of [[-1], [2 ** 21], [1.5], ['1'], 3, Array(1001).fill(1)]) {
      await expect(fx.queue.getCountsPerPriority(priorities as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    }
    await fx.queue.add('x', {}, { delay: 60_000 })
    for (const opts of [{ count: 0 }, { count: 1.5 }, { cuont: 1 }]) {
      await expect(fx.queue.promoteJobs(opts as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    }
    expect(await fx.queue.getCountsPerPriority([0, 0, 5])).toEqual({ '0': 0, '5': 0 })
    expect((await fx.queue.counts()).delayed).toBe(1)
  })

  it('refuses a priority out of range, or not an integer, with ERR_OPTIONS and nothing written', async () => {
    for (const priority of [-1, 2 ** 21, 1.5, '1']) {
      await expect(fx.queue.add('x', {}, { priority } as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    }
    await expect(fx.queue.add('x', {}, { lifo: 'yes' } as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    expect(await fx.queue.counts()).toMatchObject({ wait: 0, prioritized: 0 })
    expect((await fx.queue.add('x', {}, { priority: 2 ** 21 - 1 })).priority).toBe(2 ** 21 - 1)
  })
})

describe('the rate limit', () => {
  it('at most max starts in any window of duration, across worker processes on separate connections', async () => {
    const limiter = { max: 5, duration: 300 }
    const starts: number[] = []
    for (let i = 0; i < 3; i++) fx.worker((job: Job) => void starts.push(job.processedOn as number), { concurrency: 4, limiter })
    await fx.queue.addBulk(Array.from({ length: 30 }, () => ({ name: 'x', data: {} })))
    await waitFor(async () => (await fx.queue.counts()).completed === 30, { timeoutMs: 15_000, what: 'all done' })

    // Every window of `duration` (by Redis's clock, the jobs' processedOn) holds at most `max` starts.
    const sorted = [...starts].sort((a, b) => a - b)
    const worst = Math.max(...sorted.map((t) => sorted.filter((s) => s >= t && s < t + limiter.duration).length))
    expect(worst).toBeLessThanOrEqual(limiter.max)
    // And the window was used: 30 jobs at 5 per 300 ms take at least 5 windows.
    expect((sorted.at(-1) as number) - (sorted[0] as number)).toBeGreaterThanOrEqual(5 * limiter.duration - 50)
  })

  it('a limited worker sleeps until the window has room: it sends no command meanwhile', async () => {
    const counting = await countingClient(redis.port)
    try {
      const w = fx.worker(() => undefined, { connection: counting.client, limiter: { max: 2, duration: 1_000 } })
      await fx.queue.addBulk(Array.from({ length: 6 }, () => ({ name: 'x', data: {} })))
      await waitFor(async () => (await fx.queue.counts()).completed === 2, { what: 'the first window' })
      counting.reset()
      // A window, not a synchronisation: inside the held second nothing is asked of Redis.
      await new Promise((resolve) => setTimeout(resolve, 400))
      expect(counting.sent.filter((c) => c !== 'bzpopmin')).toEqual([])
      await waitFor(async () => (await fx.queue.counts()).completed === 6, { timeoutMs: 10_000, what: 'all done' })
      await w.close()
    } finally {
      counting.close()
    }
  })

  it('queue.rateLimit holds every worker back; Worker.RateLimitError returns the job without using an attempt', async () => {
    const queue = fx.queue
    let thrown = 0
    const started: number[] = []
    fx.worker(async () => {
      started.push(performance.now())
      if (thrown++ === 0) {
        await queue.rateLimit(500)
        throw Worker.RateLimitError()
      }
    })
    const t0 = performance.now()
    await fx.queue.add('x', {}, { jobId: 'r', attempts: 1 })
    await waitFor(async () => (await fx.queue.getJob('r'))?.state === 'completed', { what: 'done after the hold' })

    expect(await fx.queue.getJob('r')).toMatchObject({ attemptsMade: 1, attemptsStarted: 2 })
    expect((started[1] as number) - t0).toBeGreaterThanOrEqual(450)
    expect(await queue.getRateLimitTtl()).toBe(-2)
    await expect(queue.rateLimit(-1)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  })

  it('refuses a bad limiter with ERR_OPTIONS', () => {
    for (const limiter of [{ max: 0, duration: 100 }, { max: 1 }, { max: 1, duration: 0 }, { max: 1, duration: 10, maxx: 1 }, 5]) {
      // direct: the constructor's option validation is under test
      expect(() => new Worker('q', () => undefined, { connection: redis.url, limiter } as never)).toThrow(
        expect.objectContaining({ code: 'ERR_OPTIONS' }),
      )
    }
  })
})
