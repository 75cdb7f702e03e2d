/**
 * What a job costs in Redis and what it keeps: ids "1", "2", ... per queue for jobs added without one (a
 * custom id may not be an integer, as in BullMQ); no field for an option left at its default; a finished
 * job's receipt in its `token` field rather than fields of its own; the stacks of failed runs in
 * `stacktrace`, at most `stackTraceLimit`.
 */
import { describe, expect, it } from 'vitest'
import { type EchoMQError, type Job, Queue } from '../../lib/index.js'
import { MAX_BLOCK } from '../../lib/queue/job-ids.js'
import { waitingSince } from '../../lib/redis/queries.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

const codeOf = async (promise: Promise<unknown>) => ((await promise.catch((e: unknown) => e)) as EchoMQError).code
const fields = async (id: string) => Object.keys(await redis.client.hgetall(fx.queue.keys.job(id))).sort()

describe('job ids', () => {
  it('jobs added without an id are numbered 1, 2, 3 ... in the order added, one by one or in bulk', async () => {
    const one = await fx.queue.add('x', {})
    const two = await fx.queue.add('x', {})
    const bulk = await fx.queue.addBulk([
      { name: 'a', data: {} },
      { name: 'b', data: {}, opts: { jobId: 'custom' } },
      { name: 'c', data: {} },
    ])
    expect([one.id, two.id, ...bulk.map((j) => j.id)]).toEqual(['1', '2', '3', 'custom', '4'])
    expect((await fx.queue.getJob('4'))?.name).toBe('c')
  })

  it('producers share the counter: no two jobs get one id, however many add at once', async () => {
    // direct: several producers (Queue objects, each its own connection) of one queue, which is under test
    const producers = Array.from({ length: 4 }, () => new Queue('q', { connection: redis.url }))
    try {
      const jobs = await Promise.all(producers.flatMap((p) => Array.from({ length: 50 }, () => p.add('x', {}))))
      const ids = jobs.map((j) => j.id)
      expect(new Set(ids).size).toBe(200)
      expect(ids.every((id) => /^[1-9]\d*$/.test(id))).toBe(true)
      expect((await fx.queue.counts()).wait).toBe(200)
      // Each producer reserves blocks that double, so the counter moved at most a block past each one's last.
      expect(Number(await redis.client.hget(fx.queue.keys.meta, 'ids'))).toBeLessThan(200 + 4 * MAX_BLOCK)
    } finally {
      await Promise.all(producers.map((p) => p.close()))
    }
  })

  it('a custom id that is an integer is refused with a hint, and nothing is written', async () => {
    for (const id of ['1', '42', '-3', '0']) {
      expect(await codeOf(fx.queue.add('x', {}, { jobId: id }))).toBe('ERR_JOB_ID')
    }
    const err = (await fx.queue.add('x', {}, { jobId: '7' }).catch((e: unknown) => e)) as EchoMQError
    expect(err.hint).toMatch(/order-42/)
    expect(await redis.client.keys('emq:{q}:*')).toEqual([])
    // Not integers: accepted.
    for (const id of ['007', '1.5', '1e3', 'order-42']) expect((await fx.queue.add('x', {}, { jobId: id })).id).toBe(id)
  })

  it('a generated id already taken (the counter was reset while jobs remained) is skipped, not merged', async () => {
    const first = await fx.queue.add('x', { n: 1 })
    await redis.client.hdel(fx.queue.keys.meta, 'ids')
    // direct: a second producer, whose own id counter is under test
    const other = new Queue('q', { connection: redis.url })
    try {
      const again = await other.add('x', { n: 2 })
      expect(again.id).not.toBe(first.id)
      expect((await other.getJob(first.id))?.data).toEqual({ n: 1 })
      expect((await other.getJob(again.id))?.data).toEqual({ n: 2 })
    } finally {
      await other.close()
    }
  })
  it('in a bulk too: generated ids taken after a reset of the counter are skipped, the others added, none merged', async () => {
    const first = await fx.queue.addBulk(Array.from({ length: 3 }, (_, n) => ({ name: 'x', data: { n } })))
    await redis.client.hdel(fx.queue.keys.meta, 'ids')
    // direct: a second producer, whose own id counter is under test
    const other = new Queue('q', { connection: redis.url })
    try {
      const again = await other.addBulk(Array.from({ length: 5 }, (_, n) => ({ name: 'x', data: { again: n } })))
      expect(again.map((j) => j.data)).toEqual(Array.from({ length: 5 }, (_, n) => ({ again: n })))
      expect(again.map((j) => j.id).filter((id) => first.some((f) => f.id === id))).toEqual([])
      for (const j of [...first, ...again]) expect((await other.getJob(j.id))?.data).toEqual(j.data)
      expect((await other.counts()).wait).toBe(8)
    } finally {
      await other.close()
    }
  })
})

describe('what a job stores', () => {
  it('a waiting job added with the defaults holds name, data, createdOn and state; a completed one adds only its run', async () => {
    await fx.queue.add('x', { n: 1 }, { jobId: 'w' })
    expect(await fields('w')).toEqual(['createdOn', 'data', 'name', 'state'])
    fx.worker((job) => (job.id === 'w' ? 'done' : undefined))
    await waitFor(async () => (await fx.queue.getJob('w'))?.state === 'completed', { what: 'the job to complete' })
    // No attemptsMade for a first attempt (read as 1 once completed: lua/finish-16.lua).
    expect(await fields('w')).toEqual([
      'createdOn',
      'data',
      'finishedOn',
      'name',
      'returnValue',
      'startedOn',
      'state',
      'token',
      'workerName',
    ])
    const job = (await fx.queue.getJob('w')) as Job
    expect(job).toMatchObject({ attempts: 1, attemptsMade: 1, attemptsStarted: 1, returnValue: 'done', stacktrace: [], priority: 0 })
    expect(job.createdOn).toBeGreaterThan(0)
    // Nor a returnValue for a result of null (a processor that returned nothing): read as null.
    await fx.queue.add('x', { n: 2 }, { jobId: 'nothing' })
    await waitFor(async () => (await fx.queue.getJob('nothing'))?.state === 'completed', { what: 'the second job to complete' })
    expect(await fields('nothing')).toEqual(['createdOn', 'data', 'finishedOn', 'name', 'startedOn', 'state', 'token', 'workerName'])
    expect(await fx.queue.getJob('nothing')).toMatchObject({ attemptsMade: 1, returnValue: null })
  })

  it('an option given with its default value is not stored either; any other value is', async () => {
    await fx.queue.add('x', {}, { jobId: 'same', attempts: 1, removeOnComplete: { count: 1000, age: 86_400 }, stackTraceLimit: 10 })
    // attempts 0 is BullMQ's "no retries", as 1: a single run, stored as the default is (not at all).
    await fx.queue.add('x', {}, { jobId: 'zero', attempts: 0 })
    expect(await fields('zero')).toEqual(['createdOn', 'data', 'name', 'state'])
    expect((await fx.queue.getJob('zero'))?.opts.attempts).toBe(1)
    await fx.queue.add('x', {}, { jobId: 'other', attempts: 4, removeOnComplete: 5, stackTraceLimit: 2 })
    expect(await fields('same')).toEqual(['createdOn', 'data', 'name', 'state'])
    expect(await fields('other')).toEqual(['attempts', 'createdOn', 'data', 'keep', 'name', 'stackTraceLimit', 'state'])
    expect((await fx.queue.getJob('other'))?.opts).toMatchObject({ attempts: 4, removeOnComplete: 5, stackTraceLimit: 2 })
  })

  it('a bulk mixing default jobs with one that has options stores each as added alone would', async () => {
    await fx.queue.addBulk([
      { name: 'x', data: { n: 1 }, opts: { jobId: 'plain' } },
      { name: 'x', data: { n: 2 }, opts: { jobId: 'tuned', attempts: 7, priority: 2, lifo: false } },
      { name: 'x', data: { n: 3 }, opts: { jobId: 'plain2' } },
    ])
    expect(await fields('plain')).toEqual(['createdOn', 'data', 'name', 'state'])
    expect(await fields('plain2')).toEqual(['createdOn', 'data', 'name', 'state'])
    expect(await fields('tuned')).toEqual(['attempts', 'createdOn', 'data', 'name', 'priority', 'state'])
    expect(await fx.queue.getJob('tuned')).toMatchObject({ attempts: 7, priority: 2, state: 'prioritized', data: { n: 2 } })
    expect(await fx.queue.getJob('plain2')).toMatchObject({ attempts: 1, state: 'wait', data: { n: 3 } })
  })

  it("a waiting job's wait starts at createdOn until it re-enters the line (the reaper's oldest-wait age)", async () => {
    const job = await fx.queue.add('x', {}, { jobId: 'old', attempts: 3, backoff: 60_000 })
    expect(await fields('old')).not.toContain('waitingSince')
    expect(await waitingSince(redis.client, fx.queue.keys, 'old')).toBe(job.createdOn)
    const w = fx.worker(async () => {
      throw new Error('again')
    })
    await waitFor(async () => (await fx.queue.getJob('old'))?.state === 'delayed', { what: 'the retry to wait its backoff' })
    await w.close()
    await fx.queue.promoteJob('old')
    const since = await waitingSince(redis.client, fx.queue.keys, 'old')
    expect(since).toBeGreaterThan(job.createdOn)
    expect(since).toBeGreaterThanOrEqual((await fx.queue.getJob('old'))?.startedOn ?? Number.POSITIVE_INFINITY)
  })
})

describe('stack traces', () => {
  it('each failed run leaves its stack in job.stacktrace, oldest first; failedReason is the last message', async () => {
    let n = 0
    fx.worker(() => {
      n++
      throw new Error(`boom ${n}`)
    })
    await fx.queue.add('x', {}, { jobId: 's', attempts: 3 })
    await waitFor(async () => (await fx.queue.getJob('s'))?.state === 'failed', { what: 'the job to fail' })
    const job = (await fx.queue.getJob('s')) as Job
    expect(job.stacktrace).toHaveLength(3)
    expect(job.stacktrace.map((s) => s.split('\n')[0])).toEqual(['Error: boom 1', 'Error: boom 2', 'Error: boom 3'])
    expect(job.stacktrace[0]).toMatch(/job-storage\.test\.ts/)
    expect(job.failedReason).toBe('boom 3')
  })

  it('stackTraceLimit keeps the newest n; 0 keeps none; a stall leaves no stack', async () => {
    let n = 0
    fx.worker(() => {
      n++
      throw new Error(`e${n}`)
    })
    await fx.queue.add('x', {}, { jobId: 'two', attempts: 4, stackTraceLimit: 2 })
    await waitFor(async () => (await fx.queue.getJob('two'))?.state === 'failed', { what: 'two to fail' })
    expect(((await fx.queue.getJob('two')) as Job).stacktrace.map((s) => s.split('\n')[0])).toEqual(['Error: e3', 'Error: e4'])
    await fx.queue.add('x', {}, { jobId: 'none', attempts: 2, stackTraceLimit: 0 })
    await waitFor(async () => (await fx.queue.getJob('none'))?.state === 'failed', { what: 'none to fail' })
    expect(((await fx.queue.getJob('none')) as Job).stacktrace).toEqual([])
    expect(await fields('none')).not.toContain('stacktrace')
  })

  it('stackTraceLimit is validated like every option', async () => {
    for (const bad of [-1, 1.5, 101, '3']) {
      expect(await codeOf(fx.queue.add('x', {}, { jobId: 'bad', stackTraceLimit: bad as number }))).toBe('ERR_OPTIONS')
    }
    expect(await fx.queue.getJob('bad')).toBeUndefined()
  })
})
