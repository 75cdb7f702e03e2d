/**
 * Faults found by running the project from outside (round three), each reproduced here first: timers
 * longer than Node's 24.8-day ceiling, "retry all" while workers fail the jobs again, delayed jobs behind
 * a backlog, trims cut short, a fleet's worth of dead reservations, retention after the sweep fails jobs,
 * and the reaper's hourly discovery across short-lived containers.
 */
import { spawn } from 'node:child_process'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { longTimeout, MAX_TIMER_MS } from '../../lib/clock.js'
import { sweep } from '../../lib/index.js'
import { Discovery } from '../../lib/reaper/discovery.js'
import { finish, take } from '../../lib/redis/commands.js'
import { discoveryKey, queueKeys } from '../../lib/redis/keys.js'
import { countingClient } from '../helpers/counting.js'
import { useQueue } from '../helpers/fixture.js'
import { crashedJobs, stalledBefore } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const keys = queueKeys('emq', 'q')
const DAY_MS = 24 * 3_600_000
const fx = useQueue(redis, {
  workers: { lockDuration: 1_000, closeTimeout: 500 },
  onError: (err) => {
    throw err
  },
})
const worker = fx.worker

describe('timers longer than 2^31 - 1 ms', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('longTimeout fires once, after the whole duration, however long (a stepped clock)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] })
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(w.name)
    process.on('warning', onWarning)
    let fired = 0
    longTimeout(() => fired++, 365 * DAY_MS)

    await vi.advanceTimersByTimeAsync(MAX_TIMER_MS + 1)
    await vi.advanceTimersByTimeAsync(300 * DAY_MS)
    const early = fired
    await vi.advanceTimersByTimeAsync(365 * DAY_MS - MAX_TIMER_MS - 1 - 300 * DAY_MS)
    process.off('warning', onWarning)

    expect(early).toBe(0)
    expect(fired).toBe(1)
    expect(warnings).not.toContain('TimeoutOverflowWarning')
  })

  it.each([25, 30, 365])('an idle worker holding a job delayed %i days sends nothing until it is due', async (days) => {
    const counting = await countingClient(redis.port)
    // The stalled check has its own timer (stalledInterval): off, so the window shows the delayed job's cost alone.
    const w = worker(() => undefined, { connection: counting.client, skipStalledCheck: true })
    try {
      const job = await fx.queue.add('later', {}, { delay: days * DAY_MS })
      // The idle worker wakes once for the new due time, promotes nothing and sets its timer.
      await waitFor(() => counting.sent.includes('evalsha'), { what: 'the worker to look at the delayed job' })
      await waitFor(async () => (await redis.client.zscore(keys.marker, 'd')) === null, { what: 'the marker to be taken' })
      counting.reset()

      // An observation window, not a synchronisation: nothing should happen in it.
      await new Promise((resolve) => setTimeout(resolve, 500))

      expect(counting.sent.filter((c) => c !== 'bzpopmin')).toEqual([])
      expect((await fx.queue.getJob(job.id))?.state).toBe('delayed')
    } finally {
      await w.close()
      counting.close()
    }
  })

  it('a 30-day backoff waits 30 days, not 24.86', async () => {
    worker(() => {
      throw new Error('downstream down')
    })
    const job = await fx.queue.add('x', {}, { attempts: 2, backoff: 30 * DAY_MS })

    const retry = await waitFor(async () => {
      const j = await fx.queue.getJob(job.id)
      return j?.state === 'delayed' ? j : undefined
    })

    // The failed run's receipt ("=<token> delayed <ms>", see finish-16.lua) says when it ended.
    const failedAt = Number((await redis.client.hget(keys.job(job.id), 'token'))?.split(' ')[2])
    expect((retry.dueAt as number) - failedAt).toBe(30 * DAY_MS)
  })

  it('echomq sweep --every 40000m waits between sweeps instead of sweeping back to back', async () => {
    const { REDIS_URL: _ignored, ...env } = process.env
    const child = spawn(
      process.execPath,
      [new URL('../../bin/echomq.js', import.meta.url).pathname, 'sweep', '--every', '40000m', '--json', '--redis-url', redis.url],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    )
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    try {
      await waitFor(() => stdout.includes('"sweeps"'), { timeoutMs: 20_000, what: 'the first sweep' })
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      expect(stdout.trim().split('\n')).toHaveLength(1)
      expect(stderr).not.toContain('TimeoutOverflowWarning')
    } finally {
      child.kill('SIGTERM')
    }
  })
})

describe('retryJobs while workers fail the jobs again', () => {
  it('acts on the jobs failed when it began, each at most once, and ends', async () => {
    const ids = Array.from({ length: 400 }, (_, i) => `j${i}`)
    const fail = () => {
      throw new Error('downstream still down')
    }
    for (const id of ids) await fx.queue.add('x', {}, { jobId: id, attempts: 1 })
    const w = worker(fail, { concurrency: 20 })
    await waitFor(async () => (await fx.queue.counts()).failed === ids.length, { what: '400 failed jobs' })

    const moved = await fx.queue.retryJobs()

    expect(new Set(moved).size).toBe(moved.length)
    expect(moved.length).toBeLessThanOrEqual(ids.length)
    expect(moved.length).toBeGreaterThan(0)
    expect(moved.every((id) => ids.includes(id))).toBe(true)
    const jobs = await Promise.all(ids.map((id) => fx.queue.getJob(id)))
    expect(Math.max(...jobs.map((j) => j?.retried ?? 0))).toBe(1)
    await w.close()
  })
})

describe('delayed jobs behind a backlog', () => {
  it('a job falls due and is promoted while the backlog is still waiting', async () => {
    for (let i = 0; i < 1_000; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, k) => fx.queue.add('bulk', { n: i + k })))
    }
    worker(() => new Promise((resolve) => setTimeout(resolve, 5)))
    await waitFor(async () => (await fx.queue.counts()).active === 1, { what: 'the worker to be busy' })

    const delayed = await fx.queue.add('soon', {}, { delay: 200 })
    const promoted = await waitFor(
      async () => {
        const h = await redis.client.hmget(keys.job(delayed.id), 'state', 'waitingSince')
        return h[0] !== 'delayed' ? Number(h[1]) : undefined
      },
      { intervalMs: 5 },
    )

    expect(promoted - (delayed.dueAt as number)).toBeLessThan(1_000)
    expect((await fx.queue.counts()).wait).toBeGreaterThan(100)
  })
})

describe('trims cut short', () => {
  it('a finish whose trim never ran (its worker died) leaves the next slack of jobs to ask again', async () => {
    const taker = { workerToken: 'w', leaseMs: 10_000, workerName: 'dead' }
    const asked: number[] = []
    for (let i = 0; i < 60; i++) {
      const job = await fx.queue.add('x', {}, { removeOnComplete: { count: 20 } })
      const [run] = (await take(redis.client, keys, taker, [job.id])).taken
      if (!run) throw new Error('not taken')
      const reply = await finish(redis.client, keys, { id: job.id, token: run.token }, 'complete', 'null')
      // Nobody trims: every worker asked dies before it does.
      if (reply.trim) asked.push(i + 1)
    }
    expect(asked).toEqual([30, 40, 50, 60]) // at count + slack, each slack (retention.lua trimDue)
  })

  it('with a worker that trims, completed stays within count + 2 slack between sweeps', async () => {
    const sizes: number[] = []
    const w = worker(() => undefined, { concurrency: 8 })
    w.on('completed', () => void redis.client.zcard(keys.completed).then((n) => sizes.push(n)))
    for (let i = 0; i < 600; i += 100) {
      await Promise.all(Array.from({ length: 100 }, () => fx.queue.add('x', {}, { removeOnComplete: { count: 20 } })))
    }
    await waitFor(async () => (await fx.queue.counts()).wait + (await fx.queue.counts()).active === 0, { what: 'every job done' })
    // count + 2 slack, plus the jobs finished while a trim runs (its two round trips: the oldest ids, then
    // the script), each of the 8 slots finishing a job or two meanwhile, and the size is read a moment
    // after each completion. Without a trim at every slack the set would reach 600.
    expect(Math.max(...sizes)).toBeLessThanOrEqual(20 + 2 * 10 + 4 * 8)
  })
})

describe('the sweep', () => {
  it('returns every dead reservation of a crashed fleet in one pass', async () => {
    for (let i = 0; i < 1_500; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, k) => fx.queue.add('x', {}, { jobId: `r${i + k}` })))
    }
    const popped = (await redis.client.rpop(keys.wait, 1_500)) ?? []
    await redis.client.zadd(keys.reserved, ...popped.flatMap((id) => ['1', id]))

    await sweep(redis.client, 'q', { graceMs: 0 })

    expect(await redis.client.zcard(keys.reserved)).toBe(0)
    expect(await redis.client.llen(keys.wait)).toBe(1_500)
  })

  it('keeps failed within its retention when the sweep itself fails the jobs', async () => {
    await stalledBefore(redis.client, 'q', await crashedJobs(redis.client, 'q', 4, { attempts: 1, removeOnFail: 3 }))

    await sweep(redis.client, 'q', { graceMs: 0 })
    const second = await sweep(redis.client, 'q', { graceMs: 0 })

    expect(second.failed).toHaveLength(4)
    expect(await redis.client.zcard(keys.failed)).toBe(3)
  })
})

describe('discovery across short-lived reaper containers', () => {
  it('a cold reaper scans when no reaper has in the last hour, and not when one has', async () => {
    await crashedJobs(redis.client, 'lost', 1)
    await redis.client.sadd('emq:queues', 'other')
    const scans = await countingClient(redis.port)
    try {
      // A container that has never seen a scan: the key is missing, so it scans at once.
      expect(await new Discovery('emq').missing(scans.client, ['other'])).toEqual(['lost'])
      expect(await redis.client.pttl(discoveryKey('emq'))).toBeGreaterThan(59 * 60_000)
      await redis.client.srem('emq:queues', 'lost')
      scans.reset()

      // The next container, minutes later: no scan.
      expect(await new Discovery('emq').missing(scans.client, ['other'])).toEqual([])
      expect(scans.sent).not.toContain('scan')

      // An hour after the last pass (the key expired): the next cold container scans again.
      await redis.client.del(discoveryKey('emq'))
      expect(await new Discovery('emq').missing(scans.client, ['other'])).toEqual(['lost'])
    } finally {
      scans.close()
    }
  })
})
