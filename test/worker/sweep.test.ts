import { describe, expect, it } from 'vitest'
import { sweep } from '../../lib/index.js'
import { extend } from '../../lib/redis/commands.js'
import { useQueue } from '../helpers/fixture.js'
import { addJobs, crashedJobs, holdJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'

const redis = useRedis()
const fx = useQueue(redis)

const { keys } = fx

describe('sweep: the two-phase decision, one case per branch', () => {
  it('leaves a job with a live lease alone', async () => {
    const q = fx.queue
    await addJobs(redis.client, 'q', ['live'])
    await holdJobs(redis.client, 'q', 1, { leaseMs: 60_000, workerToken: 'w' })

    const first = await sweep(redis.client, 'q', { graceMs: 0 })
    const second = await sweep(redis.client, 'q', { graceMs: 0 })

    expect(first).toEqual({ marked: [], recovered: [], failed: [] })
    expect(second).toEqual({ marked: [], recovered: [], failed: [] })
    expect((await q.getJob('live'))?.state).toBe('active')
  })

  it('marks a job whose lease is gone, then recovers it on the next sweep with stalledCounter + 1 (no attempt used)', async () => {
    const [id] = await crashedJobs(redis.client, 'q', 1)

    const first = await sweep(redis.client, 'q', { graceMs: 0 })
    const q = fx.queue
    const afterFirst = await q.getJob(id as string)
    const second = await sweep(redis.client, 'q', { graceMs: 0 })

    expect(first).toEqual({ marked: [id], recovered: [], failed: [] })
    expect(afterFirst).toMatchObject({ state: 'active', attemptsMade: 0 })
    expect(second).toEqual({ marked: [], recovered: [id], failed: [] })
    expect(await q.getJob(id as string)).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1 })
    expect(await redis.client.lrange(keys.wait, -1, -1)).toEqual([id]) // served next
    expect(await q.counts()).toEqual({ wait: 1, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 0 })
  })

  it("moves a job stalled past maxStalledCount to failed, with BullMQ's reason, whatever attempts are left", async () => {
    const [id] = await crashedJobs(redis.client, 'q', 1, { attempts: 3 })
    await redis.client.hset(keys.job(id as string), 'stalledCounter', '1') // stalled once before

    await sweep(redis.client, 'q', { graceMs: 0 })
    const second = await sweep(redis.client, 'q', { graceMs: 0 })

    const job = await fx.queue.getJob(id as string)
    expect(second).toEqual({ marked: [], recovered: [], failed: [id] })
    expect(job).toMatchObject({ state: 'failed', attemptsMade: 0 })
    expect(job?.failedReason).toBe('job stalled more than allowable limit')
    expect(job?.stalledCounter).toBe(2)
    expect(await redis.client.llen(keys.wait)).toBe(0)
    expect(await redis.client.zscore(keys.failed, id as string)).not.toBeNull()
  })

  it('does not recover a marked job before its mark is graceMs old', async () => {
    const [id] = await crashedJobs(redis.client, 'q', 1)

    await sweep(redis.client, 'q', { graceMs: 60_000 })
    const early = await sweep(redis.client, 'q', { graceMs: 60_000 })
    const late = await sweep(redis.client, 'q', { graceMs: 0 })

    expect(early).toEqual({ marked: [], recovered: [], failed: [] })
    expect(late.recovered).toEqual([id])
  })

  it('leaves alone a marked job whose worker renewed before the second sweep, and clears the mark', async () => {
    const [id] = await crashedJobs(redis.client, 'q', 1)
    await sweep(redis.client, 'q', { graceMs: 0 })
    expect(await redis.client.zscore(keys.stalled, id as string)).not.toBeNull()

    const statuses = await extend(redis.client, keys, 60_000, [{ id: id as string, token: 'dead-worker:1', index: false }])
    const second = await sweep(redis.client, 'q', { graceMs: 0 })

    expect(statuses).toEqual(['reclaimed'])
    expect(await redis.client.zscore(keys.stalled, id as string)).toBeNull()
    expect(second).toEqual({ marked: [], recovered: [], failed: [] })
    expect(await redis.client.get(keys.lock(id as string))).toBe('dead-worker:1')
  })

  it('one renewal call answers each lease in its place: renewed (and re-indexed), lost, reclaimed', async () => {
    await addJobs(redis.client, 'q', ['a', 'b', 'c'])
    const held = await holdJobs(redis.client, 'q', 3, { leaseMs: 60_000, workerToken: 'w' })
    const token = (id: string) => held.find((h) => h.id === id)?.token as string
    await redis.client.set(keys.lock('b'), 'other:1', 'PX', 60_000) // taken over by another worker
    await redis.client.del(keys.lock('c')) // lapsed, not yet swept

    const statuses = await extend(redis.client, keys, 30_000, [
      { id: 'b', token: token('b'), index: true },
      { id: 'a', token: token('a'), index: true },
      { id: 'c', token: token('c'), index: false },
    ])

    expect(statuses).toEqual(['lost', 'renewed', 'reclaimed'])
    const [seconds] = await redis.client.time()
    const rescored = Number(await redis.client.zscore(keys.active, 'a'))
    expect(rescored).toBeLessThan(Number(seconds) * 1000 + 40_000) // re-indexed at the new, shorter lease
    expect(await redis.client.pttl(keys.lock('a'))).toBeLessThanOrEqual(30_000)
    expect(await redis.client.get(keys.lock('b'))).toBe('other:1')
    expect(await redis.client.pttl(keys.lock('b'))).toBeGreaterThan(30_000) // another worker's lease untouched
    expect(await redis.client.get(keys.lock('c'))).toBe(token('c'))
  })

  it('re-scores a live lease whose recorded deadline is stale (the index is refreshed every other tick), and marks a dead one behind it', async () => {
    await addJobs(redis.client, 'q', ['live'])
    await holdJobs(redis.client, 'q', 1, { leaseMs: 60_000, workerToken: 'w' })
    const [dead] = await crashedJobs(redis.client, 'q', 1)
    await redis.client.zadd(keys.active, '1', 'live') // a stale deadline, ahead of the dead lease's

    const result = await sweep(redis.client, 'q', { graceMs: 0, audit: 0 })

    expect(result).toEqual({ marked: [dead], recovered: [], failed: [] })
    const rescored = Number(await redis.client.zscore(keys.active, 'live'))
    const [seconds] = await redis.client.time()
    expect(rescored).toBeGreaterThan(Number(seconds) * 1000 + 50_000) // now + the lease's TTL
    expect(await redis.client.zscore(keys.stalled, 'live')).toBeNull()
  })

  it('by default keeps a grace (the reaper\u2019s, 15 s): a second sweep right after the mark does not recover', async () => {
    const [id] = await crashedJobs(redis.client, 'q', 1)

    const first = await sweep(redis.client, 'q')
    const second = await sweep(redis.client, 'q')

    expect(first.marked).toEqual([id])
    expect(second).toEqual({ marked: [], recovered: [], failed: [] })
    expect(await redis.client.zscore(keys.stalled, id as string)).not.toBeNull()
  })

  it('walks past more stalled jobs than one call takes (limit), and each call stays bounded', async () => {
    const ids = await crashedJobs(redis.client, 'q', 250)

    const first = await sweep(redis.client, 'q', { limit: 40, graceMs: 0 })
    const second = await sweep(redis.client, 'q', { limit: 40, graceMs: 0 })

    expect(first.marked.sort()).toEqual([...ids].sort())
    expect(second.recovered.sort()).toEqual([...ids].sort())
  })
})

describe('sweep: overlapping sweeps', () => {
  it('16 sweeps at once on 500 marked jobs recover each exactly once', async () => {
    const ids = await crashedJobs(redis.client, 'q', 500, { attempts: 5 })
    expect((await sweep(redis.client, 'q', { graceMs: 0 })).marked).toHaveLength(500)

    const clients = Array.from({ length: 16 }, () => redis.connect())
    const results = await Promise.all(clients.map((c) => sweep(c, 'q', { limit: 50, graceMs: 0 })))

    const recovered = results.flatMap((r) => r.recovered)
    const wait = await redis.client.lrange(keys.wait, 0, -1)
    const q = fx.queue
    const attempts = await Promise.all(ids.map(async (id) => (await q.getJob(id))?.stalledCounter))
    expect(recovered).toHaveLength(500)
    expect(new Set(recovered).size).toBe(500)
    expect(wait).toHaveLength(500)
    expect(new Set(wait).size).toBe(500)
    expect(attempts.every((a) => a === 1)).toBe(true)
    expect(await q.counts()).toMatchObject({ wait: 500, active: 0, stalled: 0 })
  })
})

/** `n` jobs taken with a one-minute lease: healthy work in flight. */
async function healthyJobsInFlight(n: number): Promise<void> {
  await addJobs(
    redis.client,
    'q',
    Array.from({ length: n }, (_, i) => `h${i}`),
  )
  await holdJobs(redis.client, 'q', n, { leaseMs: 60_000, workerToken: 'w' })
}

async function commandCalls(): Promise<Record<string, number>> {
  const stats = await redis.client.info('commandstats')
  return Object.fromEntries([...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map(([, name, n]) => [name, Number(n)]))
}

/** A ready connection that counts the commands it sends from now on (a script call is one, as per-command pricing bills it). */
async function countingClient() {
  const client = redis.connect()
  await client.ping()
  const sent: string[] = []
  const send = client.sendCommand.bind(client)
  client.sendCommand = ((command: { name: string }) => {
    sent.push(command.name)
    return send(command as never)
  }) as typeof client.sendCommand
  return { client, sent }
}

describe('sweep: cost', () => {
  it('an idle queue costs one command: the probe', async () => {
    await fx.queue.add('job', {}, { jobId: 'x' })
    await redis.client.del(keys.wait) // nothing waiting, nothing in flight
    const { client, sent } = await countingClient()

    await sweep(client, 'q')

    expect(sent).toEqual(['evalsha'])
  })

  it('with nothing stalled, one pass is the probe and one audit step; it reads no page of the lease index', async () => {
    await healthyJobsInFlight(300)
    await redis.client.config('RESETSTAT')
    const { client, sent } = await countingClient()

    await sweep(client, 'q', { audit: 20, graceMs: 0 })

    const calls = await commandCalls()
    expect(sent).toEqual(['evalsha', 'evalsha'])
    expect(calls.zrangebyscore).toBe(3) // the probe found no expired deadline, no expired reservation and no job scheduler due
    expect(calls.zmscore).toBe(2) // the audit checked 20: their deadlines and marks in one read each
    expect(calls.pttl).toBe(20)
  })

  it('with audit 0, one pass is one command however many jobs are in flight', async () => {
    await healthyJobsInFlight(300)
    const { client, sent } = await countingClient()

    await sweep(client, 'q', { audit: 0, graceMs: 0 })

    expect(sent).toEqual(['evalsha'])
  })
})

describe('sweep: the audit', () => {
  it('marks, then recovers, a job whose lease key was deleted before its recorded deadline', async () => {
    const q = fx.queue
    await addJobs(redis.client, 'q', ['gone', 'kept'])
    await holdJobs(redis.client, 'q', 2, { leaseMs: 60_000, workerToken: 'w' })
    await redis.client.del(keys.lock('gone')) // deleted by hand, or evicted

    const first = await sweep(redis.client, 'q', { graceMs: 0 })
    const second = await sweep(redis.client, 'q', { graceMs: 0 })
    const off = await sweep(redis.client, 'q', { audit: 0, graceMs: 0 })

    expect(first).toEqual({ marked: ['gone'], recovered: [], failed: [] })
    expect(second).toEqual({ marked: [], recovered: ['gone'], failed: [] })
    expect(off).toEqual({ marked: [], recovered: [], failed: [] })
    expect((await q.getJob('kept'))?.state).toBe('active')
  })
})
