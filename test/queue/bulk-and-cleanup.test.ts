/**
 * addBulk (all or none, in a few script calls), drain, clean and obliterate (bounded steps), and the
 * getters as BullMQ users write them, on a real Redis.
 */
import { describe, expect, it } from 'vitest'
import { type BulkJob, type Job, Queue } from '../../lib/index.js'
import { JOB_DEFAULTS, type JobSettings } from '../../lib/job-options.js'
import { add, type NewJob } from '../../lib/redis/adding.js'
import { encodeOptions } from '../../lib/redis/job-codec.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { countingClient } from '../helpers/counting.js'
import { useClosing, useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })
const track = useClosing()

/** Calls of `command` in INFO commandstats' text, scripts' inner calls included. */
const callsOf = (stats: string, command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)

/** Every key of queue q (its hash tag), by SCAN: for the tests only. */
async function keysOfQueue(): Promise<string[]> {
  const found: string[] = []
  let cursor = '0'
  do {
    const [next, keys] = await redis.client.scan(cursor, 'MATCH', '*{q}*', 'COUNT', 1000)
    found.push(...keys)
    cursor = next
  } while (cursor !== '0')
  return found
}

describe('addBulk', () => {
  it('adds every job in a few script calls, in order; an existing jobId returns the stored job', async () => {
    await fx.queue.add('x', { old: true }, { jobId: 'taken' })
    const counting = await countingClient(redis.port)
    try {
      // direct: a queue on a counting client, whose commands are under test
      const q = new Queue('q', { connection: counting.client })
      counting.reset()
      const jobs = await q.addBulk([
        ...Array.from({ length: 999 }, (_, i) => ({ name: 'bulk', data: { i } })),
        { name: 'bulk', data: { new: true }, opts: { jobId: 'taken' } },
      ])
      expect(jobs.map((j) => j.data)).toEqual([...Array.from({ length: 999 }, (_, i) => ({ i })), { old: true }])
      // 1,000 jobs: five script calls in one transaction (and the read of the existing job): the first an EVAL,
      // which caches the script, the others EVALSHA (no script text sent or hashed again).
      expect(counting.sent.filter((c) => c === 'eval')).toHaveLength(1)
      expect(counting.sent.filter((c) => c === 'evalsha')).toHaveLength(4)
    } finally {
      counting.close()
    }
    expect((await fx.queue.counts()).wait).toBe(1000)
    expect((await fx.queue.getJobs('wait', { start: 0, end: 2 })).map((j) => j.data)).toEqual([{ old: true }, { i: 0 }, { i: 1 }])
  })

  it('checks the job ids of a call with one EXISTS, not one a job; an existing custom id is still taken, in a bulk or alone', async () => {
    await fx.queue.add('x', { old: true }, { jobId: 'taken' })
    await redis.client.config('RESETSTAT')
    const jobs = await fx.queue.addBulk(Array.from({ length: 1000 }, (_, i) => ({ name: 'bulk', data: { i } })))
    expect(new Set(jobs.map((j) => j.id)).size).toBe(1000)
    // Five script calls of 200 jobs: each an EXISTS of its jobs' keys and one of the events' listeners.
    const stats = await redis.client.info('commandstats')
    expect(callsOf(stats, 'exists')).toBe(10)
    expect(callsOf(stats, 'hset')).toBe(1000)

    // Generated ids with a custom one that exists: the stored job is returned, unchanged, the others added.
    const mixed = await fx.queue.addBulk([
      { name: 'bulk', data: { i: 'a' } },
      { name: 'bulk', data: { new: true }, opts: { jobId: 'taken' } },
      { name: 'bulk', data: { i: 'b' } },
    ])
    expect(mixed.map((j) => j.data)).toEqual([{ i: 'a' }, { old: true }, { i: 'b' }])
    expect((await fx.queue.add('x', { new: true }, { jobId: 'taken' })).data).toEqual({ old: true })
    // The same custom id twice in one bulk (ids not distinct: each job looked at): the second is the first's.
    const twice = await fx.queue.addBulk([
      { name: 'bulk', data: { n: 1 }, opts: { jobId: 'twice' } },
      { name: 'bulk', data: { n: 2 }, opts: { jobId: 'twice' } },
    ])
    expect(twice.map((j) => [j.id, j.data])).toEqual([
      ['twice', { n: 1 }],
      ['twice', { n: 1 }],
    ])
    // Every id of a call taken: none added.
    const again = await fx.queue.addBulk([
      { name: 'bulk', data: { n: 3 }, opts: { jobId: 'taken' } },
      { name: 'bulk', data: { n: 4 }, opts: { jobId: 'twice' } },
    ])
    expect(again.map((j) => j.data)).toEqual([{ old: true }, { n: 1 }])
    expect((await fx.queue.getJob('taken'))?.data).toEqual({ old: true })
    expect((await fx.queue.counts()).wait).toBe(1 + 1000 + 2 + 1)
  })

  it('sends the script text once per client: later bulks are EVALSHA only, and a Redis that lost its cache is sent it again', async () => {
    const counting = await countingClient(redis.port)
    const bulk = (tag: string) => Array.from({ length: 400 }, (_, i) => ({ name: tag, data: { i } }))
    try {
      // direct: a queue on a counting client, whose commands are under test
      const q = new Queue('q', { connection: counting.client })
      await q.addBulk(bulk('a'))
      counting.reset()
      await q.addBulk(bulk('b'))
      expect(counting.sent.filter((c) => c === 'eval')).toHaveLength(0)
      expect(counting.sent.filter((c) => c === 'evalsha')).toHaveLength(2)
      // A restarted Redis: every call of the transaction answers NOSCRIPT, none ran; it is sent again, an EVAL first.
      await redis.client.script('FLUSH')
      counting.reset()
      await q.addBulk(bulk('c'))
      expect(counting.sent.filter((c) => c === 'eval')).toHaveLength(1)
      expect(counting.sent.filter((c) => c === 'evalsha')).toHaveLength(3)
    } finally {
      counting.close()
    }
    // Each bulk added once: the one sent again after NOSCRIPT had not run.
    expect((await fx.queue.counts()).wait).toBe(1200)
  })

  it('leaves the lines and the jobs as the same adds one at a time do (lifo, priorities, delays, options, taken ids)', async () => {
    const jobs: BulkJob[] = [
      { name: 'a', data: { n: 1 }, opts: { jobId: 'a' } },
      { name: 'b', data: { n: 2 }, opts: { jobId: 'b', lifo: true } },
      {
        name: 'c',
        data: { n: 3 },
        opts: { jobId: 'c', priority: 3, attempts: 4, backoff: { type: 'exponential', delay: 50, jitter: 0.5 } },
      },
      { name: 'd', data: { n: 4 }, opts: { jobId: 'd', delay: 60_000, removeOnComplete: 7, keepLogs: 3 } },
      { name: 'e', data: { n: 5 }, opts: { jobId: 'e', priority: 1, stackTraceLimit: 2, removeOnFail: { count: 5, age: 60 } } },
      { name: 'f', data: { n: 6 }, opts: { jobId: 'f', lifo: true, removeOnComplete: true } },
      { name: 'g', data: { n: 7 }, opts: { jobId: 'g', delay: 60_000, priority: 2 } },
      { name: 'a2', data: { n: 8 }, opts: { jobId: 'a' } },
      { name: 'h', data: { n: 9 }, opts: { jobId: 'h', priority: 3 } },
      { name: 'i', data: { n: 10 }, opts: { jobId: 'i', delay: 90_000 } },
      { name: 'j', data: { n: 11 }, opts: { jobId: 'j' } },
    ]
    // direct: a second queue beside the fixture's, its jobs added one at a time to compare with the bulk
    const one = track(new Queue('one', { connection: redis.client }))
    for (const j of jobs) await one.add(j.name, j.data, j.opts)
    await fx.queue.addBulk(jobs)
    const state = async (name: string) => {
      const k = queueKeys('emq', name)
      const c = redis.client
      const hashes: Record<string, Record<string, string>> = {}
      for (const id of 'abcdefghij') {
        const { createdOn, dueAt, ...h } = await c.hgetall(k.job(id))
        hashes[id] = { ...h, ...(dueAt ? { dueIn: String(Number(dueAt) - Number(createdOn)) } : {}) }
      }
      const prioritized = await c.zrange(k.prioritized, '0', '-1', 'WITHSCORES')
      return {
        wait: await c.lrange(k.wait, '0', '-1'),
        // Priorities and the order within them (the counter's part differs between two queues only by its start).
        prioritized: prioritized.flatMap((v, i) => (i % 2 === 0 ? [[v, Math.floor(Number(prioritized[i + 1]) / 2 ** 32)]] : [])),
        delayed: await c.zrange(k.delayed, '0', '-1'),
        marker: await c.zrange(k.marker, '0', '-1'),
        hashes,
      }
    }
    const bulk = await state('q')
    expect(bulk).toEqual(await state('one'))
    expect(bulk.wait).toEqual(['j', 'a', 'b', 'f'])
    expect(bulk.prioritized.map(([id]) => id)).toEqual(['e', 'c', 'h'])
    expect(bulk.delayed).toEqual(['d', 'g', 'i'])
    expect(bulk.hashes.c).toMatchObject({ priority: '3', attempts: '4', backoff: 'exponential,50,0,0.5', state: 'prioritized' })
    expect(bulk.hashes.d).toMatchObject({ delay: '60000', dueIn: '60000', state: 'delayed', keepLogs: '3' })
  })

  it('a deduplication that replaces a delayed holder added earlier in the same call leaves only the newest', async () => {
    // direct: one add-7 call whose second job expects the first as its holder (a Queue learns a holder from
    // a reply, so only a call sent by hand names one added in the same call)
    const spec = { id: 'deb', ttl: 60_000, replace: true }
    const job = (id: string, holder: string | null): NewJob => ({
      id,
      name: 'j',
      data: '{}',
      ...encodeOptions({ ...JOB_DEFAULTS, delay: 60_000 }),
      deduplication: { spec, holder },
    })
    const reply = await add(redis.client, fx.keys, [job('h1', null), job('h2', 'h1')])
    expect(reply.added).toEqual([true, true])
    expect(await redis.client.exists(fx.keys.job('h1'))).toBe(0)
    expect(await redis.client.zrange(fx.keys.delayed, '0', '-1')).toEqual(['h2'])
    expect(await fx.queue.getDeduplicationJobId('deb')).toBe('h2')
  })

  it('one add call of more jobs than its pushes take at once files them all, in order', async () => {
    // direct: addBulk sends at most 200 jobs a call; add-7 pushes its lines 1,000 arguments at a time
    const job = (i: number, opts: Partial<JobSettings>): NewJob => ({
      id: `x${i}`,
      name: 'j',
      data: '{}',
      ...encodeOptions({ ...JOB_DEFAULTS, ...opts }),
    })
    const n = 1100
    const reply = await add(
      redis.client,
      fx.keys,
      Array.from({ length: n }, (_, i) => job(i, i % 2 ? { delay: 60_000 } : {})),
    )
    expect(reply.added.every(Boolean)).toBe(true)
    const wait = await redis.client.lrange(fx.keys.wait, '0', '-1')
    expect(wait).toHaveLength(n / 2)
    expect([wait[0], wait[n / 2 - 1]]).toEqual([`x${n - 2}`, 'x0'])
    const delayed = await redis.client.zrange(fx.keys.delayed, '0', '-1')
    expect(delayed).toHaveLength(n / 2)
    expect([delayed[0], delayed[n / 2 - 1]]).toEqual(['x1', `x${n - 1}`])
  })

  it('validates every job first: one bad job and nothing is written', async () => {
    const bad = [
      { name: 'ok', data: {} },
      { name: '', data: {} },
    ]
    await expect(fx.queue.addBulk(bad)).rejects.toMatchObject({ code: 'ERR_JOB_NAME', message: expect.stringMatching(/^addBulk job 1: /) })
    await expect(fx.queue.addBulk([{ name: 'ok', data: 1n } as never])).rejects.toMatchObject({
      code: 'ERR_JOB_DATA',
      message: expect.stringMatching(/^addBulk job 0: /),
    })
    await expect(fx.queue.addBulk([{ name: 'ok', data: {}, opts: { atempts: 2 } } as never])).rejects.toMatchObject({
      code: 'ERR_OPTIONS',
    })
    await expect(fx.queue.addBulk('jobs' as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    expect(await fx.queue.counts()).toMatchObject({ wait: 0, delayed: 0 })
  })

  it('is all or none: a Redis that refuses the transaction (out of memory) adds none of it', async () => {
    await redis.client.config('SET', 'maxmemory', '1')
    try {
      const jobs = Array.from({ length: 500 }, (_, i) => ({ name: 'x', data: { i } }))
      await expect(fx.queue.addBulk(jobs)).rejects.toMatchObject({ code: 'ERR_OOM' })
    } finally {
      await redis.client.config('SET', 'maxmemory', '0')
    }
    expect(await keysOfQueue()).toEqual([])
  })
})

describe('drain, clean, obliterate', () => {
  it('drain removes waiting jobs and their logs, delayed ones only when asked', async () => {
    await fx.queue.addBulk(Array.from({ length: 700 }, () => ({ name: 'x', data: {} })))
    const logged = await fx.queue.add('x', {}, { jobId: 'logged' })
    await logged.log('a line')
    await fx.queue.add('x', {}, { jobId: 'later', delay: 60_000 })

    await fx.queue.drain()
    expect(await fx.queue.counts()).toMatchObject({ wait: 0, delayed: 1 })
    expect(await redis.client.exists(fx.keys.job('logged'), fx.keys.logs('logged'))).toBe(0)
    await fx.queue.drain(true)
    expect(await fx.queue.counts()).toMatchObject({ wait: 0, delayed: 0 })
    expect(await fx.queue.getJob('later')).toBeUndefined()
  })

  it('clean removes finished jobs past the grace period, oldest first, up to limit (0: all), and returns their ids', async () => {
    fx.worker((job: Job) => {
      if ((job.data as { fail?: boolean }).fail) throw new Error('no')
    })
    await fx.queue.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'x', data: {}, opts: { jobId: `c${i}` } })))
    await fx.queue.add('x', { fail: true }, { jobId: 'f', attempts: 1 })
    await waitFor(async () => (await fx.queue.counts()).completed === 5 && (await fx.queue.counts()).failed === 1, { what: 'done' })

    expect(await fx.queue.clean(60_000, 0)).toEqual([])
    const two = await fx.queue.clean(0, 2)
    expect(two).toHaveLength(2)
    expect(await fx.queue.clean(0, 0)).toHaveLength(3)
    expect(await fx.queue.clean(0, 0, 'failed')).toEqual(['f'])
    expect(await fx.queue.counts()).toMatchObject({ completed: 0, failed: 0 })
    await expect(fx.queue.clean(-1)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    await expect(fx.queue.clean(0, 0, 'finished' as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  })

  it('obliterate refuses while jobs are in flight (nothing deleted), and with force deletes every key of the queue', async () => {
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    fx.worker(() => gate)
    await fx.queue.add('x', {}, { jobId: 'busy' })
    await waitFor(async () => (await fx.queue.counts()).active === 1, { what: 'a job in flight' })
    await fx.queue.addBulk(Array.from({ length: 1200 }, () => ({ name: 'x', data: {} })))
    await fx.queue.add('x', {}, { delay: 60_000 })
    const before = await keysOfQueue()

    await expect(fx.queue.obliterate()).rejects.toMatchObject({ code: 'ERR_QUEUE_ACTIVE' })
    expect(await keysOfQueue()).toEqual(expect.arrayContaining(before))
    // Refused, it leaves the queue as it found it: not paused (BullMQ's stays paused), or still paused.
    expect(await fx.queue.isPaused()).toBe(false)
    await fx.queue.pause()
    await expect(fx.queue.obliterate()).rejects.toMatchObject({ code: 'ERR_QUEUE_ACTIVE' })
    expect(await fx.queue.isPaused()).toBe(true)

    await fx.queue.obliterate({ force: true })
    release()
    await waitFor(async () => (await keysOfQueue()).length === 0, { what: 'every key gone' })
    expect(await redis.client.sismember('emq:queues', 'q')).toBe(0)
    await expect(fx.queue.obliterate({ forse: true } as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  })

  it('obliterate refuses while a busy worker holds a reservation (its next job, out of wait): nothing deleted', async () => {
    await fx.queue.addBulk([
      { name: 'x', data: {}, opts: { jobId: 'next' } },
      { name: 'x', data: {} },
    ])
    // What takeJobs.lua reserveNext leaves: the id out of `wait`, in `reserved` until its lease's deadline.
    await redis.client.lrem(fx.keys.wait, 1, 'next')
    await redis.client.zadd(fx.keys.reserved, Date.now() + 30_000, 'next')
    const before = (await keysOfQueue()).sort()
    await expect(fx.queue.obliterate()).rejects.toMatchObject({ code: 'ERR_QUEUE_ACTIVE', message: expect.stringMatching(/set aside/) })
    // The same keys (SCAN lists them in no set order).
    expect((await keysOfQueue()).sort()).toEqual(before)
    await fx.queue.obliterate({ force: true })
    expect(await keysOfQueue()).toEqual([])
  })

  it('obliterate deletes the deduplication ids held with a ttl: the next add of such an id is a new job', async () => {
    const held = await fx.queue.add('x', { v: 1 }, { deduplication: { id: 'D', ttl: 60_000 } })
    await fx.queue.add('x', { v: 1 }, { deduplication: { id: 'U' } })
    expect(await fx.queue.getDeduplicationJobId('D')).toBe(held.id)

    await fx.queue.obliterate({ force: true })
    expect(await keysOfQueue()).toEqual([])

    const again = await fx.queue.add('x', { v: 2 }, { deduplication: { id: 'D', ttl: 60_000 } })
    expect((await fx.queue.getJob(again.id))?.data).toEqual({ v: 2 })
    expect(await fx.queue.getDeduplicationJobId('D')).toBe(again.id)
  })
})

describe('getters as BullMQ users write them', () => {
  it('getJobs(types, start, end, asc) with Redis-style ranks, waiting as wait; getJobCounts keyed as asked', async () => {
    await fx.queue.addBulk(['w1', 'w2', 'w3'].map((id) => ({ name: 'x', data: {}, opts: { jobId: id } })))
    await fx.queue.add('x', {}, { jobId: 'd1', delay: 60_000 })
    const ids = async (...args: Parameters<Queue['getJobs']>) => (await fx.queue.getJobs(...args)).map((j) => j.id)

    expect(await ids(['waiting'])).toEqual(['w3', 'w2', 'w1'])
    expect(await ids(['wait'], 0, -1, true)).toEqual(['w1', 'w2', 'w3'])
    expect(await ids('wait', -2, -1, true)).toEqual(['w2', 'w3'])
    expect(await ids(['wait', 'waiting', 'delayed'], 0, -1, true)).toEqual(['w1', 'w2', 'w3', 'd1'])
    expect(await ids(['wait'], -300, 99999, true)).toEqual(['w1', 'w2', 'w3'])
    expect(await fx.queue.getJobCounts('waiting', 'delayed', 'failed')).toEqual({ waiting: 3, delayed: 1, failed: 0 })
    expect(await fx.queue.getJobCounts()).toEqual({
      active: 0,
      completed: 0,
      delayed: 1,
      failed: 0,
      prioritized: 0,
      waiting: 3,
      'waiting-children': 0,
    })
    expect(await fx.queue.count()).toBe(4)
    await expect(fx.queue.getJobs(['finished' as never])).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  })

  it('processedOn and finishedOn on every job, from getJob and from the worker\u2019s events', async () => {
    const w = fx.worker(() => 'ok')
    const completed: Job[] = []
    w.on('completed', (job: Job) => completed.push(job))
    await fx.queue.add('x', {}, { jobId: 'a' })
    await waitFor(() => completed.length === 1, { what: 'done' })

    const stored = await fx.queue.getJob('a')
    expect(stored?.processedOn).toBeGreaterThan(0)
    expect(stored?.finishedOn).toBeGreaterThanOrEqual(stored?.processedOn as number)
    expect(stored?.timestamp).toBe(stored?.createdOn)
    expect(stored?.returnvalue).toBe('ok')
    expect(completed[0]?.finishedOn).toBe(stored?.finishedOn)
    expect(completed[0]?.processedOn).toBe(stored?.processedOn)
  })

  it('jobs finished, failed or due in the same millisecond keep the order they did so', async () => {
    // One transaction: every add runs within a few microseconds, most in one millisecond.
    const ids = ['m', 'c', 'x', 'a', 'q', 'b']
    await fx.queue.addBulk(ids.map((id) => ({ name: 'x', data: {}, opts: { jobId: id, delay: 60_000 } })))
    const scores = await redis.client.zrange(fx.keys.delayed, '0', '-1', 'WITHSCORES')
    expect(scores.filter((_, i) => i % 2 === 0)).toEqual(ids)
    const ms = new Set(scores.filter((_, i) => i % 2 === 1).map((s) => Math.floor(Number(s))))
    expect(ms.size).toBeLessThan(ids.length)
  })
})

describe('finished jobs per minute', () => {
  it('counts completions and failures (the worker\u2019s and the sweep\u2019s) by minute, the last hour only', async () => {
    const { finishedPerMinute } = await import('../../lib/redis/queries.js')
    const { crashedJobs } = await import('../helpers/queue-state.js')
    const { sweep } = await import('../../lib/index.js')
    const w = fx.worker((job: Job) => {
      if ((job.data as { fail?: boolean }).fail) throw new Error('no')
    })
    await fx.queue.addBulk([
      ...Array.from({ length: 3 }, () => ({ name: 'x', data: {} })),
      ...Array.from({ length: 2 }, () => ({ name: 'x', data: { fail: true }, opts: { attempts: 1 } })),
    ])
    await waitFor(async () => (await fx.queue.counts()).completed === 3 && (await fx.queue.counts()).failed === 2, { what: 'done' })
    await w.close()
    for (const id of await crashedJobs(redis.client, 'q', 1, { attempts: 1, idPrefix: 's' }))
      await redis.client.hset(fx.keys.job(id), 'stalledCounter', '1') // its second stall: failed
    await sweep(redis.client, 'q', { graceMs: 0 })
    await sweep(redis.client, 'q', { graceMs: 0 })
    const series = await finishedPerMinute(redis.client, fx.keys)
    expect(series).toHaveLength(60)
    const sum = series.reduce((a, m) => ({ completed: a.completed + m.completed, failed: a.failed + m.failed }), {
      completed: 0,
      failed: 0,
    })
    expect(sum).toEqual({ completed: 3, failed: 3 })
    // Counts older than an hour are dropped by the first count of a minute: as if the queue had last
    // finished a job 61 minutes ago, with counts in that hour.
    const last = series[59]?.minute as number
    await redis.client.hdel(fx.keys.metrics, `c${last}`, `f${last}`)
    await redis.client.hset(fx.keys.metrics, 'last', String(last - 61), `c${last - 61}`, '7', `f${last - 70}`, '1')
    for (const id of await crashedJobs(redis.client, 'q', 1, { attempts: 1, idPrefix: 't' }))
      await redis.client.hset(fx.keys.job(id), 'stalledCounter', '1')
    await sweep(redis.client, 'q', { graceMs: 0 })
    await sweep(redis.client, 'q', { graceMs: 0 })
    const fields = Object.keys(await redis.client.hgetall(fx.keys.metrics)).filter((f) => f !== 'last')
    // Only this minute's failure is left (or the next minute's, had the minute turned meanwhile).
    expect(fields).toHaveLength(1)
    expect(fields[0]).toMatch(/^f\d+$/)
    expect(Number(fields[0]?.slice(1))).toBeGreaterThanOrEqual(last)
    expect(Number(await redis.client.hget(fx.keys.metrics, 'last'))).toBeGreaterThanOrEqual(last)
  })
})
