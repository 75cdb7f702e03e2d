/**
 * Deduplication (BullMQ 6.7's `deduplication: { id, ttl?, extend?, replace? }`): an add whose id is held
 * returns the holder and emits `deduplicated`; without a ttl the id is released when the job completes,
 * fails for good or is removed; with one when the ttl passes; `replace` debounces a delayed holder;
 * getDeduplicationJobId, removeDeduplicationKey; addBulk; hostile options refused with nothing written;
 * a job without the option stores no byte for it.
 */
import { describe, expect, it } from 'vitest'
import { type EchoMQError, FlowProducer, type Job, Queue, QueueEvents } from '../../lib/index.js'
import { countingClient } from '../helpers/counting.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 400, closeTimeout: 500 } })

const codeOf = async (promise: Promise<unknown>) => ((await promise.catch((e: unknown) => e)) as EchoMQError).code

async function listening(): Promise<QueueEvents> {
  const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
  await events.waitUntilReady()
  return events
}

describe('an id held without a ttl', () => {
  it('returns the holder and emits deduplicated until the job completes; then a new job is added', async () => {
    const events = await listening()
    try {
      const first = await fx.queue.add('j', { n: 1 }, { deduplication: { id: 'order-7' } })
      expect(first.deduplicationId).toBe('order-7')
      const seen = nextEvent<[{ jobId: string; deduplicationId: string; deduplicatedJobId: string }]>(events, 'deduplicated')
      const second = await fx.queue.add('j', { n: 2 }, { deduplication: { id: 'order-7' } })
      expect(second.id).toBe(first.id)
      // As BullMQ's add: the job asked for, under the holder's id; the stored one is unchanged.
      expect(second.data).toEqual({ n: 2 })
      expect((await fx.queue.getJob(first.id))?.data).toEqual({ n: 1 })
      const [payload] = await seen
      expect(payload.jobId).toBe(first.id)
      expect(payload.deduplicationId).toBe('order-7')
      expect(payload.deduplicatedJobId).not.toBe(first.id)
      expect(await fx.queue.getDeduplicationJobId('order-7')).toBe(first.id)
      expect(await fx.queue.counts()).toMatchObject({ wait: 1 })

      const w = fx.worker(() => 'done')
      await nextEvent(w, 'completed')
      expect(await fx.queue.getDeduplicationJobId('order-7')).toBeNull()
      // Released: no entry left behind.
      expect(await redis.client.hget(fx.keys.meta, 'de:order-7')).toBeNull()
      const third = await fx.queue.add('j', { n: 3 }, { deduplication: { id: 'order-7' } })
      expect(third.id).not.toBe(first.id)
    } finally {
      await events.close()
    }
  })

  it('ids with commas and other bytes: a holder whose job id has commas deduplicates, once known or not', async () => {
    const first = await fx.queue.add('j', { n: 1 }, { jobId: 'a,b,ü', deduplication: { id: 'x,y' } })
    // direct: a second Queue on the same queue, which does not know the holder this one saw
    const other = new Queue('q', { connection: redis.client })
    try {
      expect((await other.add('j', { n: 2 }, { deduplication: { id: 'x,y' } })).id).toBe(first.id)
    } finally {
      await other.close()
    }
    expect((await fx.queue.add('j', { n: 3 }, { deduplication: { id: 'x,y' } })).id).toBe(first.id)
    expect(await fx.queue.getDeduplicationJobId('x,y')).toBe('a,b,ü')
    expect(await fx.queue.counts()).toMatchObject({ wait: 1 })
  })

  it('is released when the job fails for good or is removed, not by a retry', async () => {
    const w = fx.worker(() => {
      throw new Error('no')
    })
    const a = await fx.queue.add('j', {}, { deduplication: { id: 'f' }, attempts: 2, backoff: 3_600_000 })
    await nextEvent(w, 'failed')
    // The first failure retries (after its backoff): still held.
    expect((await fx.queue.getJob(a.id))?.state).toBe('delayed')
    expect(await fx.queue.getDeduplicationJobId('f')).toBe(a.id)
    await fx.queue.promoteJob(a.id)
    await waitFor(async () => (await fx.queue.getJob(a.id))?.state === 'failed', { what: 'failed for good' })
    expect(await redis.client.hget(fx.keys.meta, 'de:f')).toBeNull()
    await w.close()

    const b = await fx.queue.add('j', {}, { deduplication: { id: 'r' }, delay: 60_000 })
    expect((await fx.queue.add('j', {}, { deduplication: { id: 'r' } })).id).toBe(b.id)
    await b.remove()
    expect(await redis.client.hget(fx.keys.meta, 'de:r')).toBeNull()
    expect((await fx.queue.add('j', {}, { deduplication: { id: 'r' } })).id).not.toBe(b.id)
  })

  it('a holder whose job is gone (drained) holds nothing: the next add takes the id over', async () => {
    const a = await fx.queue.add('j', {}, { deduplication: { id: 'd' } })
    await fx.queue.drain()
    expect(await fx.queue.getDeduplicationJobId('d')).toBeNull()
    const b = await fx.queue.add('j', {}, { deduplication: { id: 'd' } })
    expect(b.id).not.toBe(a.id)
    expect(await fx.queue.getDeduplicationJobId('d')).toBe(b.id)
  })

  it('removeDeduplicationKey releases the id (1), or finds none (0)', async () => {
    const a = await fx.queue.add('j', {}, { deduplication: { id: 'k' } })
    expect(await fx.queue.removeDeduplicationKey('k')).toBe(1)
    expect(await fx.queue.removeDeduplicationKey('k')).toBe(0)
    expect(await fx.queue.removeDebounceKey('k')).toBe(0)
    const b = await fx.queue.add('j', {}, { deduplication: { id: 'k' } })
    expect(b.id).not.toBe(a.id)
    expect(await fx.queue.getDebounceJobId('k')).toBe(b.id)
  })
})

describe('an id held with a ttl', () => {
  it('is held until the ttl passes, even after the job completed', async () => {
    const a = await fx.queue.add('j', {}, { deduplication: { id: 't', ttl: 60_000 } })
    const w = fx.worker(() => 'ok')
    await nextEvent(w, 'completed')
    expect((await fx.queue.add('j', {}, { deduplication: { id: 't', ttl: 60_000 } })).id).toBe(a.id)
    expect(await fx.queue.getDeduplicationJobId('t')).toBe(a.id)
    const pttl = await redis.client.pttl(fx.keys.deduplication('t'))
    expect(pttl).toBeGreaterThan(50_000)
    expect(pttl).toBeLessThanOrEqual(60_000)
    // The ttl runs out (shortened here rather than waited for).
    await redis.client.pexpire(fx.keys.deduplication('t'), 50)
    await waitFor(async () => (await fx.queue.getDeduplicationJobId('t')) === null, { what: 'the ttl to pass' })
    expect((await fx.queue.add('j', {}, { deduplication: { id: 't', ttl: 60_000 } })).id).not.toBe(a.id)
  })

  it('outlives its job removed at once by its retention (removeOnComplete: true)', async () => {
    const w = fx.worker(() => 'ok')
    const completed = nextEvent<[Job]>(w, 'completed')
    const a = await fx.queue.add('j', { n: 1 }, { removeOnComplete: true, deduplication: { id: 'gone', ttl: 60_000 } })
    await completed
    expect(await fx.queue.getJob(a.id)).toBeUndefined()
    expect(await fx.queue.getDeduplicationJobId('gone')).toBe(a.id)
    const again = await fx.queue.add('j', { n: 2 }, { deduplication: { id: 'gone', ttl: 60_000 } })
    expect(again.id).toBe(a.id)
    expect(again.data).toEqual({ n: 2 })
    expect(await fx.queue.getJob(a.id)).toBeUndefined()
    expect(await fx.queue.count()).toBe(0)
  })

  it('extend restarts the ttl on each deduplicated add', async () => {
    const a = await fx.queue.add('j', {}, { deduplication: { id: 'x', ttl: 60_000 }, delay: 60_000 })
    await redis.client.pexpire(fx.keys.deduplication('x'), 1_000)
    expect((await fx.queue.add('j', {}, { deduplication: { id: 'x', ttl: 60_000, extend: true } })).id).toBe(a.id)
    expect(await redis.client.pttl(fx.keys.deduplication('x'))).toBeGreaterThan(50_000)
    // Without extend the ttl runs on.
    await redis.client.pexpire(fx.keys.deduplication('x'), 1_000)
    await fx.queue.add('j', {}, { deduplication: { id: 'x', ttl: 60_000 } })
    expect(await redis.client.pttl(fx.keys.deduplication('x'))).toBeLessThanOrEqual(1_000)
  })

  it('replace debounces: the newest add replaces a holder still delayed, not one that runs', async () => {
    const events = await listening()
    try {
      const a = await fx.queue.add('j', { v: 1 }, { delay: 60_000, deduplication: { id: 'deb', ttl: 60_000, replace: true } })
      const removed = nextEvent<[{ jobId: string; prev: string }]>(events, 'removed')
      const deduplicated = nextEvent<[{ jobId: string; deduplicatedJobId: string }]>(events, 'deduplicated')
      const b = await fx.queue.add('j', { v: 2 }, { delay: 60_000, deduplication: { id: 'deb', ttl: 60_000, replace: true } })
      expect(b.id).not.toBe(a.id)
      expect(await fx.queue.getJob(a.id)).toBeUndefined()
      expect((await removed)[0]).toMatchObject({ jobId: a.id, prev: 'delayed' })
      expect((await deduplicated)[0]).toMatchObject({ jobId: b.id, deduplicatedJobId: a.id })
      expect(await fx.queue.getDeduplicationJobId('deb')).toBe(b.id)
      expect(await fx.queue.counts()).toMatchObject({ delayed: 1 })

      await fx.queue.promoteJob(b.id)
      const c = await fx.queue.add('j', { v: 3 }, { deduplication: { id: 'deb', ttl: 60_000, replace: true } })
      expect(c.id).toBe(b.id)
      expect((await fx.queue.getJob(b.id))?.data).toEqual({ v: 2 })
    } finally {
      await events.close()
    }
  })

  it('replace keeps a delayed holder that joined a flow as a child: its parent still waits for it', async () => {
    const dedup = { delay: 60_000, deduplication: { id: 'kid', ttl: 60_000, replace: true } }
    const a = await fx.queue.add('c', { v: 1 }, { ...dedup, jobId: 'h1' })
    const producer = new FlowProducer({ connection: redis.url })
    try {
      // A flow node with the holder's id: the existing job joins the parent (BullMQ's updateExistingJobsParent).
      const flow = await producer.add({ name: 'p', queueName: 'q', children: [{ name: 'c', queueName: 'q', opts: { jobId: a.id } }] })
      expect((await fx.queue.add('c', { v: 2 }, dedup)).id).toBe(a.id)
      expect(await fx.queue.getJobState(a.id as string)).toBe('delayed')
      expect(await fx.queue.getJobState(flow.job.id as string)).toBe('waiting-children')
      expect(await (await fx.queue.getJob(flow.job.id as string))?.getDependenciesCount()).toMatchObject({ unprocessed: 1 })
    } finally {
      await producer.close()
    }
  })

  it('replace keeps a delayed holder that became a parent (a child added under it): its flow stays whole', async () => {
    const dedup = { delay: 60_000, deduplication: { id: 'deb', ttl: 60_000, replace: true } }
    const a = await fx.queue.add('j', { v: 1 }, dedup)
    await fx.queue.add('c', {}, { parent: { id: a.id as string, queue: fx.queue.qualifiedName } })
    const b = await fx.queue.add('j', { v: 2 }, dedup)
    expect(b.id).toBe(a.id)
    expect((await fx.queue.getJob(a.id as string))?.data).toEqual({ v: 1 })
    expect(await fx.queue.getJobState(a.id as string)).toBe('delayed')
    expect(await (await fx.queue.getJob(a.id as string))?.getDependenciesCount()).toMatchObject({ unprocessed: 1 })
  })
})

describe('addBulk and the cost of the option', () => {
  it('addBulk deduplicates against stored holders and within the bulk', async () => {
    const a = await fx.queue.add('j', { n: 0 }, { deduplication: { id: 'b1' } })
    const jobs = await fx.queue.addBulk([
      { name: 'j', data: { n: 1 }, opts: { deduplication: { id: 'b1' } } },
      { name: 'j', data: { n: 2 }, opts: { deduplication: { id: 'b2' } } },
      { name: 'j', data: { n: 3 } },
      { name: 'j', data: { n: 4 }, opts: { deduplication: { id: 'b2' } } },
    ])
    expect(jobs[0]?.id).toBe(a.id)
    expect(jobs[3]?.id).toBe(jobs[1]?.id)
    expect((await fx.queue.getJob(jobs[1]?.id as string))?.data).toEqual({ n: 2 })
    expect(new Set(jobs.map((j) => j.id)).size).toBe(3)
    expect(await fx.queue.counts()).toMatchObject({ wait: 3 })
    expect(await fx.queue.getDeduplicationJobId('b2')).toBe(jobs[1]?.id)
  })

  it('a bulk reads the holds once a call: one HMGET, no EXISTS, HGET or GET a job; only a repeat reads its holder', async () => {
    await redis.client.config('RESETSTAT')
    const held = Array.from({ length: 300 }, (_, i) => ({ name: 'j', data: { i }, opts: { deduplication: { id: `d${i}` } } }))
    const first = await fx.queue.addBulk(held)
    const again = await fx.queue.addBulk(held.map((j) => ({ ...j, data: { again: true } })))
    const stats = await redis.client.info('commandstats')
    expect(again.map((j) => j.id)).toEqual(first.map((j) => j.id))
    expect(await fx.queue.counts()).toMatchObject({ wait: 300 })
    expect(await fx.queue.getDeduplicationJobId('d7')).toBe(first[7]?.id)
    // Two bulks of two calls (200 + 100 jobs): per call an EXISTS of its keys, one of the events' listeners,
    // one HMGET of the holds; the first bulk's calls each write their holds with one HSET of meta.
    const calls = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
    expect([calls('exists'), calls('hmget'), calls('get'), calls('mget')]).toEqual([8, 4, 0, 0])
    expect(calls('hset')).toBe(300 + 2)
    // The repeats' holders' states (alive?), one HGET each.
    expect(calls('hget')).toBe(300)
    // Meta holds the ids as a hash table: a listpack would be scanned field by field at each lookup.
    expect(await redis.client.object('ENCODING', fx.keys.meta)).toBe('hashtable')
  })

  it('in one call: an id held with a ttl holds for an add without one, a gone holder is taken over, a repeat finds the first', async () => {
    const gone = await fx.queue.add('j', { n: 0 }, { deduplication: { id: 's' } })
    await fx.queue.drain()
    const withTtl = await fx.queue.add('j', { n: 0 }, { deduplication: { id: 't', ttl: 60_000 } })
    await fx.queue.add('j', { n: 0 }, { delay: 60_000, deduplication: { id: 't2', ttl: 60_000 } })
    const jobs = await fx.queue.addBulk([
      { name: 'j', data: { n: 1 }, opts: { deduplication: { id: 't' } } },
      { name: 'j', data: { n: 2 }, opts: { deduplication: { id: 's' } } },
      { name: 'j', data: { n: 3 }, opts: { deduplication: { id: 'u', ttl: 60_000 } } },
      { name: 'j', data: { n: 4 }, opts: { deduplication: { id: 'u' } } },
      { name: 'j', data: { n: 5 }, opts: { deduplication: { id: 'v' } } },
      { name: 'j', data: { n: 6 }, opts: { deduplication: { id: 'v', ttl: 60_000 } } },
    ])
    const [t, s, u, u2, v, v2] = jobs.map((j) => j.id)
    expect(t).toBe(withTtl.id)
    expect(s).not.toBe(gone.id)
    expect(await fx.queue.getDeduplicationJobId('s')).toBe(s)
    expect(u2).toBe(u)
    expect(v2).toBe(v)
    expect(await redis.client.pttl(fx.keys.deduplication('u'))).toBeGreaterThan(0)
    expect(await redis.client.hget(fx.keys.meta, 'de:u')).toBeNull()
    expect(await redis.client.hget(fx.keys.meta, 'de:v')).toBe(v)
    expect(await redis.client.exists(fx.keys.deduplication('v'))).toBe(0)
    // Waiting: t's holder, and the new holders of s, u and v (the drained holder's job is gone).
    expect(await fx.queue.counts()).toMatchObject({ wait: 4 })
  })

  it('a job without the option stores nothing for it; a job with one stores its id', async () => {
    const plain = await fx.queue.add('j', { n: 1 })
    expect(Object.keys(await redis.client.hgetall(fx.keys.job(plain.id))).sort()).toEqual(['createdOn', 'data', 'name', 'state'])
    expect(await redis.client.hkeys(fx.keys.meta)).not.toContain('de:')
    const d = await fx.queue.add('j', { n: 1 }, { deduplication: { id: 'z' } })
    expect(await redis.client.hget(fx.keys.job(d.id), 'deid')).toBe('z')
    expect((await fx.queue.getJob(d.id))?.deduplicationId).toBe('z')
  })

  it('an add sends one command, with the option too when the queue knows the holder; a wrong guess costs a second', async () => {
    const counting = await countingClient(redis.port)
    // direct: a queue on a counting client, whose commands are under test
    const queue = new Queue('q', { connection: counting.client })
    try {
      await queue.add('warm', {}, { jobId: 'warm' })
      counting.reset()
      await queue.add('j', { n: 1 }, { jobId: 'plain' })
      expect(counting.sent).toEqual(['evalsha'])
      counting.reset()
      const first = await queue.add('j', { n: 1 }, { jobId: 'dedup', deduplication: { id: 'c' } })
      expect(counting.sent).toEqual(['evalsha'])
      counting.reset()
      expect((await queue.add('j', { n: 2 }, { jobId: 'x2', deduplication: { id: 'c' } })).id).toBe(first.id)
      expect(counting.sent).toEqual(['evalsha'])
      // Another producer, which has not seen the holder: its first call is answered with it, the second is deduplicated.
      // direct: a second producer (Queue object) on the counting client, which has not seen the holder
      const other = new Queue('q', { connection: counting.client })
      counting.reset()
      expect((await other.add('j', { n: 3 }, { jobId: 'x3', deduplication: { id: 'c' } })).id).toBe(first.id)
      expect(counting.sent).toEqual(['evalsha', 'evalsha'])
      await other.close()
    } finally {
      await queue.close()
      counting.close()
    }
  })

  it('hostile options: a typed error and nothing written', async () => {
    const before = await redis.client.dbsize()
    const bad: unknown[] = [
      { id: '' },
      { id: 7 },
      { id: 'x'.repeat(513) },
      { id: 'a', ttl: 0 },
      { id: 'a', ttl: -1 },
      { id: 'a', ttl: 1.5 },
      { id: 'a', extend: 'yes' },
      { id: 'a', replace: 1 },
      { id: 'a', keepLastIfActive: 1 },
      { id: 'a', reschedule: 'yes' },
      { id: 'a', other: 1 },
      'a',
      null,
    ]
    for (const deduplication of bad) expect(await codeOf(fx.queue.add('j', {}, { deduplication } as never))).toBe('ERR_OPTIONS')
    expect(await codeOf(fx.queue.add('j', {}, { debounce: { id: 'a' } } as never))).toBe('ERR_OPTIONS')
    expect(await codeOf(fx.queue.addBulk([{ name: 'j', data: {}, opts: { deduplication: { id: '' } } }]))).toBe('ERR_OPTIONS')
    expect(await codeOf(fx.queue.getDeduplicationJobId('' as never))).toBe('ERR_OPTIONS')
    expect(await redis.client.dbsize()).toBe(before)
  })
})

describe('the worker side', () => {
  it("a processor's job carries its deduplication id (BullMQ's job.deduplicationId); the run releases it as it completes", async () => {
    const seen: (string | undefined)[] = []
    const opts: Job['opts'][] = []
    const w = fx.worker((job: Job) => {
      seen.push(job.deduplicationId)
      opts.push(job.opts)
    })
    // Options on both sides of `deid` in takeJobs.lua's fields: each read from its own place.
    const job = await fx.queue.add('j', {}, { deduplication: { id: 'p' }, priority: 4, lifo: true, keepLogs: 7 })
    expect(job.deduplicationId).toBe('p')
    await nextEvent(w, 'completed')
    expect(seen).toEqual(['p'])
    expect(opts[0]).toMatchObject({ priority: 4, lifo: true, keepLogs: 7, attempts: job.opts.attempts })
    expect((await fx.queue.getJob(job.id))?.deduplicationId).toBe('p')
    expect(await fx.queue.getDeduplicationJobId('p')).toBeNull()
  })

  it('job.removeDeduplicationKey() releases the id only while this job holds it (BullMQ port)', async () => {
    const released: boolean[] = []
    const w = fx.worker(async (job: Job) => {
      released.push(await job.removeDeduplicationKey())
    })
    const completed = nextEvent(w, 'completed')
    const a1 = await fx.queue.add('j', {}, { jobId: 'a1', deduplication: { id: 'dd' } })
    await completed
    expect(released).toEqual([true])
    // Held by another job: left alone.
    const a2 = await fx.queue.add('j', {}, { jobId: 'a2', deduplication: { id: 'dd', ttl: 60_000 }, delay: 60_000 })
    expect(await a1.removeDeduplicationKey()).toBe(false)
    expect(await fx.queue.getDeduplicationJobId('dd')).toBe(a2.id)
    expect(await a2.removeDeduplicationKey()).toBe(true)
    expect(await fx.queue.getDeduplicationJobId('dd')).toBeNull()
    expect(await (await fx.queue.add('j', {}, { jobId: 'plain' })).removeDeduplicationKey()).toBe(false)
  })
})
