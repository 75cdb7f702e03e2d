/**
 * queue.clean for the waiting states, as BullMQ 6.7's: 'wait' (and 'waiting', with the jobs busy workers
 * reserved), 'prioritized', 'delayed', 'paused' (none: a paused queue's jobs are 'wait'); 'active' refused.
 * A job is old by BullMQ's timestamps (createdOn, or startedOn for one that ran), and goes as queue.remove
 * removes it: log, deduplication id, parent told, `removed`. Jobs are made old by writing their timestamps
 * back in time, so no test waits for a grace period to pass. Under the key guard (test/helpers/key-guard.ts).
 */
import { describe, expect, it } from 'vitest'
import { type EchoMQError, type Job, Queue, QueueEvents } from '../../lib/index.js'
import { loadScript, SCRIPT_FILES } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { serverTimeMs } from '../../lib/redis/queries.js'
import { useClosing, useQueue } from '../helpers/fixture.js'
import { useFlows } from '../helpers/flows.js'
import { GUARD_CODE, useKeyGuard } from '../helpers/key-guard.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

// Every script these tests run fails on a key it was not given in KEYS (the clean step's, remove's).
useKeyGuard()
const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })
const flows = useFlows(redis)
const track = useClosing()

const GRACE = 60_000

/** Makes jobs of queue `queue` created (and, with `field`, run) `ago` ms before now, by Redis's clock. */
async function age(ids: string[], ago = 2 * GRACE, field = 'createdOn', queue = 'q'): Promise<void> {
  const at = String((await serverTimeMs(redis.client)) - ago)
  const k = queueKeys('emq', queue)
  for (const id of ids) await redis.client.hset(k.job(id), field, at)
}

const jobs = (ids: string[], opts: Record<string, unknown> = {}) => ids.map((id) => ({ name: 'x', data: {}, opts: { jobId: id, ...opts } }))

const codeOf = async (promise: Promise<unknown>) => ((await promise.catch((e: unknown) => e)) as EchoMQError).code

describe('clean for each waiting type', () => {
  it("wait: the jobs older than grace, oldest first, up to limit; those within it stay; 'waiting' is the same", async () => {
    await fx.queue.addBulk(jobs(['w1', 'w2', 'w3', 'w4', 'young', 'old', 'w5']))
    await age(['w1', 'w2', 'w3', 'w4', 'old'])

    expect(await fx.queue.clean(GRACE, 3, 'wait')).toEqual(['w1', 'w2', 'w3'])
    // A job within the grace period is passed over, not a stop: `old` waits behind `young`.
    expect(await fx.queue.clean(GRACE, 0, 'waiting')).toEqual(['w4', 'old'])
    expect(await fx.queue.clean(GRACE, 0, 'wait')).toEqual([])
    expect((await fx.queue.getJobs('wait', 0, -1, true)).map((j) => j.id)).toEqual(['young', 'w5'])
    expect(await redis.client.lrange(fx.keys.wait, 0, -1)).toEqual(['w5', 'young'])
    for (const id of ['w1', 'w4', 'old']) expect(await redis.client.exists(fx.keys.job(id), fx.keys.logs(id))).toBe(0)
  })

  it('prioritized: by priority, then the order they came; a job with no priority is not one of them', async () => {
    await fx.queue.addBulk([
      ...jobs(['p3'], { priority: 3 }),
      ...jobs(['p1'], { priority: 1 }),
      ...jobs(['p2', 'p2-young'], { priority: 2 }),
      ...jobs(['plain']),
    ])
    await age(['p3', 'p1', 'p2', 'plain'])

    expect(await fx.queue.clean(GRACE, 2, 'prioritized')).toEqual(['p1', 'p2'])
    expect(await fx.queue.clean(GRACE, 0, 'prioritized')).toEqual(['p3'])
    expect(await fx.queue.getJobCounts('prioritized', 'waiting')).toEqual({ prioritized: 1, waiting: 1 })
    expect(await redis.client.zrange(fx.keys.prioritized, 0, -1)).toEqual(['p2-young'])
  })

  it('delayed: by due time; a job that ran (a retry in backoff) is as old as its last start, as BullMQ', async () => {
    await fx.queue.add('x', {}, { jobId: 'late', delay: 90_000 })
    await fx.queue.add('x', {}, { jobId: 'soon', delay: 30_000 })
    await fx.queue.add('x', {}, { jobId: 'backoff', delay: 60_000 })
    await fx.queue.add('x', {}, { jobId: 'fresh', delay: 10_000 })
    await age(['late', 'soon', 'backoff'])
    await age(['backoff'], 1_000, 'startedOn')

    expect(await fx.queue.clean(GRACE, 0, 'delayed')).toEqual(['soon', 'late'])
    expect(await redis.client.zrange(fx.keys.delayed, 0, -1)).toEqual(['fresh', 'backoff'])
  })

  it("paused: none, as BullMQ 6.7's (a paused queue's jobs wait in `wait`); 'wait' cleans a paused queue's", async () => {
    await fx.queue.pause()
    await fx.queue.addBulk(jobs(['a', 'b']))
    const cleaned: [string[], string][] = []
    fx.queue.on('cleaned', (ids, type) => cleaned.push([ids, type]))

    expect(await fx.queue.clean(0, 0, 'paused')).toEqual([])
    expect(await fx.queue.getJobCounts('waiting', 'paused')).toEqual({ waiting: 2, paused: 0 })
    expect(await fx.queue.clean(0, 0, 'wait')).toEqual(['a', 'b'])
    expect(cleaned).toEqual([
      [[], 'paused'],
      [['a', 'b'], 'wait'],
    ])
    expect(await fx.queue.isPaused()).toBe(true)
  })

  it("emits cleaned on the Queue ('waiting' named 'wait', as BullMQ), and removed and cleaned on the events stream", async () => {
    // direct: a QueueEvents reading the stream from its start
    const events = track(new QueueEvents('q', { connection: redis.url, lastEventId: '0-0', blockingTimeout: 200 }))
    await events.waitUntilReady()
    const removed: { jobId: string; prev: string }[] = []
    const counts: string[] = []
    events.on('removed', (args) => removed.push(args as { jobId: string; prev: string }))
    events.on('cleaned', ({ count }) => counts.push(count))
    await fx.queue.addBulk(jobs(['a', 'b']))
    await fx.queue.add('x', {}, { jobId: 'd', delay: 60_000 })
    const cleaned: [string[], string][] = []
    fx.queue.on('cleaned', (ids, type) => cleaned.push([ids, type]))

    await fx.queue.clean(0, 0, 'waiting')
    await fx.queue.clean(0, 0, 'delayed')
    expect(cleaned).toEqual([
      [['a', 'b'], 'wait'],
      [['d'], 'delayed'],
    ])
    await waitFor(() => removed.length === 3 && counts.length === 2, { what: 'the stream events' })
    expect(removed).toEqual([
      { jobId: 'a', prev: 'wait' },
      { jobId: 'b', prev: 'wait' },
      { jobId: 'd', prev: 'delayed' },
    ])
    expect(counts).toEqual(['2', '1'])
  })
})

describe('what a cleaned job leaves, as queue.remove', () => {
  it('its log, and the deduplication id it held: the next add of that id is a new job', async () => {
    const held = await fx.queue.add('x', { v: 1 }, { deduplication: { id: 'D' } })
    await held.log('a line')
    await age([held.id])
    expect(await fx.queue.getDeduplicationJobId('D')).toBe(held.id)

    expect(await fx.queue.clean(GRACE, 0, 'wait')).toEqual([held.id])
    expect(await redis.client.exists(fx.keys.job(held.id), fx.keys.logs(held.id))).toBe(0)
    expect(await fx.queue.getDeduplicationJobId('D')).toBeNull()
    const again = await fx.queue.add('x', { v: 2 }, { deduplication: { id: 'D' } })
    expect(again.id).not.toBe(held.id)
    expect((await fx.queue.getJob(again.id))?.data).toEqual({ v: 2 })
  })

  it('a flow child tells its parent (in another queue) it is gone: the parent moves on after its last', async () => {
    const parents = flows.queue('parents')
    const flow = await flows.producer().add({
      name: 'p',
      queueName: 'parents',
      children: [
        { name: 'c', queueName: 'q', opts: { jobId: 'c1' } },
        { name: 'c', queueName: 'q', opts: { jobId: 'c2', priority: 2 } },
      ],
    })
    expect(await fx.queue.clean(0, 0, 'wait')).toEqual(['c1'])
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    expect(await (await parents.getJob(flow.job.id))?.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 1 })
    expect(await fx.queue.clean(0, 0, 'prioritized')).toEqual(['c2'])
    expect(await parents.getJobState(flow.job.id)).toBe('waiting')
    expect(await redis.client.hlen(fx.keys.handoffs)).toBe(0)
  })

  it('a flow parent of the same queue moves on after its last child and goes too, as a waiting job', async () => {
    const flow = await flows.producer().add({
      name: 'p',
      queueName: 'q',
      children: [
        { name: 'c', queueName: 'q', opts: { jobId: 'c1' } },
        { name: 'c', queueName: 'q', opts: { jobId: 'c2' } },
      ],
    })
    expect((await fx.queue.clean(0, 0, 'wait')).sort()).toEqual(['c1', 'c2', flow.job.id].sort())
    expect(await fx.queue.count()).toBe(0)
    expect(await redis.client.keys('emq:{q}:*')).toEqual(expect.not.arrayContaining([fx.keys.job(flow.job.id)]))
    expect(await redis.client.hget(fx.keys.meta, 'parents')).toBeNull()
  })

  it("a job scheduler's pending run stays (its schedule goes on), as BullMQ's", async () => {
    const pending = (await fx.queue.upsertJobScheduler('yearly', { pattern: '0 0 1 1 *' }))?.id as string
    await fx.queue.add('x', {}, { jobId: 'plain', delay: 60_000 })
    expect(await fx.queue.clean(0, 0, 'delayed')).toEqual(['plain'])
    expect(await fx.queue.getJobState(pending)).toBe('delayed')
    expect((await fx.queue.getJobScheduler('yearly'))?.key).toBe('yearly')
  })
})

describe('reservations', () => {
  it('a job a busy worker reserved (of `wait` or `prioritized`) is cleaned with its type, its reservation gone', async () => {
    await fx.queue.addBulk([...jobs(['r1', 'w1']), ...jobs(['rp', 'p1'], { priority: 1 })])
    // What takeJobs.lua reserveNext leaves: the ids out of their line, in `reserved` until they expire.
    const until = (await serverTimeMs(redis.client)) + 30_000
    await redis.client.lrem(fx.keys.wait, 1, 'r1')
    await redis.client.zadd(fx.keys.reserved, until, 'r1')
    const score = (await redis.client.zscore(fx.keys.prioritized, 'rp')) as string
    await redis.client.zrem(fx.keys.prioritized, 'rp')
    await redis.client.hset(fx.keys.reservedScores, 'rp', score)
    await redis.client.zadd(fx.keys.reserved, until, 'rp')
    expect(await fx.queue.getJobCounts('waiting', 'prioritized')).toEqual({ waiting: 2, prioritized: 2 })

    expect(await fx.queue.clean(0, 0, 'wait')).toEqual(['r1', 'w1'])
    expect(await redis.client.zrange(fx.keys.reserved, 0, -1)).toEqual(['rp'])
    expect(await fx.queue.clean(0, 0, 'prioritized')).toEqual(['rp', 'p1'])
    expect(await redis.client.exists(fx.keys.reserved, fx.keys.reservedScores)).toBe(0)
  })

  it('a busy worker with its next jobs reserved, one read into its hand: cleaned under it, it goes on, nothing stuck', async () => {
    const n = 60
    let inClean: { reserved: string[]; cleaned: string[] } | undefined
    const done: string[] = []
    const w = fx.worker(async (job: Job) => {
      if (job.id === 'j30') {
        const reserved = await redis.client.zrange(fx.keys.reserved, 0, -1)
        inClean = { reserved, cleaned: await fx.queue.clean(0, 0, 'wait') }
      }
      done.push(job.id)
    })
    const errors: unknown[] = []
    w.on('error', (err) => errors.push(err))
    await fx.queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'x', data: {}, opts: { jobId: `j${i}` } })))
    await waitFor(() => inClean, { what: 'the clean in j30' })
    await waitFor(async () => (await fx.queue.getJobCounts('active')).active === 0 && done.includes('j30'), { what: 'j30 ended' })

    const cleaned = inClean?.cleaned ?? []
    // The worker reserved its next jobs (short ones): the clean took them from under it.
    expect(inClean?.reserved.length).toBeGreaterThan(0)
    expect(cleaned).toEqual(expect.arrayContaining(inClean?.reserved ?? []))
    const after = await fx.queue.add('x', {}, { jobId: 'after' })
    await waitFor(() => done.includes(after.id), { what: 'a job added after the clean' })
    await waitFor(async () => (await fx.queue.getJobCounts('active')).active === 0, { what: 'nothing in flight' })
    expect(await fx.queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed')).toEqual({
      waiting: 0,
      prioritized: 0,
      active: 0,
      delayed: 0,
    })
    expect(await redis.client.exists(fx.keys.reserved, fx.keys.reservedScores)).toBe(0)
    // Every job ran or was cleaned; a cleaned one completed nowhere.
    const completed = (await fx.queue.getJobs('completed', 0, -1)).map((j) => j.id)
    expect(completed.filter((id) => cleaned.includes(id))).toEqual([])
    expect(completed.length + cleaned.length).toBe(n + 1)
    for (const id of cleaned) expect(await redis.client.exists(fx.keys.job(id), fx.keys.lock(id))).toBe(0)
    // A start from the hand whose reservation was cleaned is lost to the run quietly (takeJobs.lua confirmStarts).
    expect(errors).toEqual([])
    expect(await redis.client.script('EXISTS', loadScript(SCRIPT_FILES.cleanWaiting).sha)).toEqual([1])
    expect(loadScript(SCRIPT_FILES.cleanWaiting).lua).toContain(GUARD_CODE)
  })
})

describe('bad input', () => {
  it("refuses 'active', an unknown type, a bad grace or limit (ERR_OPTIONS) before any Redis call: nothing changes", async () => {
    await fx.queue.addBulk(jobs(['a', 'b']))
    const counting = await import('../helpers/counting.js').then((m) => m.countingClient(redis.port))
    try {
      // direct: a queue on a counting client, to see that a refused call sends nothing
      const q = track(new Queue('q', { connection: counting.client }))
      counting.reset()
      for (const call of [
        () => q.clean(0, 0, 'active'),
        () => q.clean(0, 0, 'finished' as never),
        () => q.clean(0, 0, 7 as never),
        () => q.clean(-1, 0, 'wait'),
        () => q.clean(0.5, 0, 'wait'),
        () => q.clean(0, -1, 'wait'),
        () => q.clean(0, 1.5, 'delayed'),
        () => q.clean('0' as never, 0, 'wait'),
      ])
        expect(await codeOf(call())).toBe('ERR_OPTIONS')
      expect(counting.sent).toEqual([])
    } finally {
      counting.close()
    }
    await expect(fx.queue.clean(0, 0, 'active')).rejects.toThrow(/active job holds a lease/)
    expect(await fx.queue.getJobCounts('waiting')).toEqual({ waiting: 2 })
  })
})

describe('a large wait list', () => {
  it('is cleaned in calls of a bounded size, oldest first, whatever its length', async () => {
    const n = 2_600
    await fx.queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'x', data: {}, opts: { jobId: `j${i}` } })))
    await fx.queue.addBulk(jobs(['young1', 'young2']))
    await age(Array.from({ length: n }, (_, i) => `j${i}`))
    const calls: number[] = []
    const spy = redis.connect()
    const send = spy.sendCommand.bind(spy)
    spy.sendCommand = ((command: { name: string; args: unknown[] }) => {
      if (command.name === 'evalsha' || command.name === 'eval') calls.push(command.args.length)
      return send(command as never)
    }) as typeof spy.sendCommand
    // direct: a queue on a client whose script calls are measured
    const q = track(new Queue('q', { connection: spy }))

    const cleaned = await q.clean(GRACE, 0, 'wait')
    expect(cleaned).toEqual(Array.from({ length: n }, (_, i) => `j${i}`))
    expect(await fx.queue.getJobCounts('waiting')).toEqual({ waiting: 2 })
    // Steps of at most 200 jobs (seven keys each), each well under Redis's 3,999 arguments.
    expect(calls.length).toBeGreaterThanOrEqual(Math.ceil(n / 200))
    expect(calls.length).toBeLessThanOrEqual(Math.ceil(n / 200) + 3)
    expect(Math.max(...calls)).toBeLessThan(2_000)
  })

  it('passes over at most 10,000 jobs within the grace period in `wait`: an old job behind more of them stays', async () => {
    await fx.queue.add('x', {}, { jobId: 'old-first' })
    await fx.queue.addBulk(Array.from({ length: 10_100 }, (_, i) => ({ name: 'x', data: {}, opts: { jobId: `y${i}` } })))
    await fx.queue.add('x', {}, { jobId: 'old-behind' })
    await age(['old-first', 'old-behind'])
    expect(await fx.queue.clean(GRACE, 0, 'wait')).toEqual(['old-first'])
    expect(await fx.queue.getJobState('old-behind')).toBe('waiting')
  })
})
