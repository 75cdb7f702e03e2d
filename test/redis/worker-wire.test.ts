/**
 * The worker's calls in their compact form (lua/finish-16.lua, lua/take-11.lua, takeJobs.lua replyFields): a
 * taken job's name and createdOn left out when they are the job's before, createdOn sent as the digits it
 * does not share with the call's time, the fields after data sent only when present (each under a letter),
 * a retry's outcome as one character, a run's token as its start number, and a completed job's log key
 * left out when the worker judged the job kept. Each case checks what the worker gets (or what Redis
 * holds) against the job as stored.
 */
import { describe, expect, it } from 'vitest'
import type { JobFields } from '../../lib/job.js'
import { finish, finishRuns, take } from '../../lib/redis/commands.js'
import { fieldsFromHash } from '../../lib/redis/job-codec.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { commandsOnKey } from '../helpers/commands-on-key.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'

const redis = useRedis()
const keys = queueKeys('emq', 'q')
const fx = useQueue(redis)
const taker = { workerToken: 'wire', leaseMs: 10_000, workerName: 'w' }

describe('taken jobs', () => {
  it('keep their names and createdOn, whether shared with the job before, older, short or absent', async () => {
    const ids: string[] = []
    for (const name of ['a', 'a', 'b', 'a']) ids.push((await fx.queue.add(name, { name })).id)
    // Written by hand: an old createdOn (shares no digits with now), a short one, and none at all.
    await redis.client.hset(keys.job(ids[1] as string), 'createdOn', '1000000000000')
    await redis.client.hset(keys.job(ids[2] as string), 'createdOn', '42')
    await redis.client.hdel(keys.job(ids[3] as string), 'createdOn')

    const { taken } = await take(redis.client, keys, taker, ids)

    const stored = await Promise.all(ids.map((id) => redis.client.hmget(keys.job(id), 'name', 'createdOn')))
    expect(taken.map((t) => [t.job.name, t.job.createdOn])).toEqual(stored.map(([name, created]) => [name, Number(created ?? 0)]))
    expect(taken.map((t) => t.token)).toEqual(ids.map(() => 'wire:1'))
    expect(taken.map((t) => t.job.attemptsStarted)).toEqual([1, 1, 1, 1])
  })

  it('keep their options and the fields after data (each sent only when present) as getJob reads them', async () => {
    const withOptions = await fx.queue.add(
      'a',
      { n: 1 },
      {
        priority: 3,
        attempts: 4,
        backoff: { type: 'fixed', delay: 5 },
        removeOnComplete: 7,
        keepLogs: 2,
        stackTraceLimit: 3,
        deduplication: { id: 'd1' },
      },
    )
    const plain = await fx.queue.add('a', { n: 2 })
    const lifo = await fx.queue.add('b', { n: 3 }, { lifo: true, attempts: 2, removeOnFail: { age: 60 } })
    const next = { ...taker, candidates: [], reservedCandidates: false, reserve: 0, reserveMs: 1, peek: 0 }
    const asStored = async (id: string) => fieldsFromHash(id, await redis.client.hgetall(keys.job(id)))
    // A take does not send failedReason (a retried job's is its lastError, which it sends).
    const sameAs = ({ failedReason: _, ...job }: JobFields) => ({ ...job, state: 'active', workerName: 'w' })

    const { taken } = await take(redis.client, keys, taker, [withOptions.id, plain.id, lifo.id])
    expect(taken).toHaveLength(3)
    for (const t of taken) expect(t.job).toEqual(sameAs(await asStored(t.job.id)))

    // A retry with a backoff says only how long it waits; one without, that it waits; and its second take
    // brings back attemptsMade, lastError and the stack.
    const [first, , last] = taken as { job: JobFields; token: string }[]
    const delayed = await finish(redis.client, keys, { id: withOptions.id, token: first?.token as string }, 'fail', 'no', next, 'Error: no')
    expect(delayed).toMatchObject({ status: 'ok', state: 'delayed', backoffMs: 5, trim: undefined, handoff: undefined })
    const waiting = await finish(redis.client, keys, { id: lifo.id, token: last?.token as string }, 'fail', 'no', next, 'Error: no\n at x')
    expect(waiting).toMatchObject({ status: 'ok', state: 'wait', trim: undefined, handoff: undefined })
    expect(waiting.backoffMs).toBeUndefined()
    const [second] = (await take(redis.client, keys, taker, [lifo.id])).taken
    const stored = await asStored(lifo.id)
    expect(stored).toMatchObject({ attemptsMade: 1, lastError: 'no', stacktrace: ['Error: no\n at x'] })
    expect(second?.job).toEqual(sameAs(stored))
  })

  it('a second start travels with its number, and its finish names it by that number', async () => {
    const job = await fx.queue.add('x', {}, { attempts: 2 })
    const [first] = (await take(redis.client, keys, taker, [job.id])).taken
    const failed = await finish(redis.client, keys, { id: job.id, token: first?.token as string }, 'fail', 'no', {
      ...taker,
      candidates: [],
      reservedCandidates: false,
      reserve: 0,
      reserveMs: 1,
      peek: 0,
    })
    expect(failed.state).toBe('wait')
    const [second] = (await take(redis.client, keys, taker, [job.id])).taken
    expect([second?.token, second?.job.attemptsStarted]).toEqual(['wire:2', 2])

    // With the worker's token in the call, the run goes as "C2": the number alone.
    const done = await finishRuns(
      redis.client,
      keys,
      [{ run: { id: job.id, token: second?.token as string }, action: 'complete', value: '1' }],
      { ...taker, candidates: [], reservedCandidates: false, reserve: 0, reserveMs: 1, peek: 0 },
    )
    expect(done.runs[0]).toMatchObject({ status: 'ok', state: 'completed' })
    // The first run's token no longer finishes anything.
    const stale = await finish(redis.client, keys, { id: job.id, token: first?.token as string }, 'complete', '1')
    expect(stale.status).toBe('lost')
  })
})

describe('a completed job judged kept', () => {
  it('is filed when its own retention removes it at once (no log key came): a trim removes it with its log later', async () => {
    const job = await fx.queue.add('x', {}, { removeOnComplete: true })
    await redis.client.rpush(keys.logs(job.id), 'a line')
    const [run] = (await take(redis.client, keys, taker, [job.id])).taken
    const reply = await finishRuns(redis.client, keys, [
      { run: { id: job.id, token: run?.token as string }, action: 'complete', value: '1', kept: true },
    ])
    expect(reply.runs[0]).toMatchObject({ status: 'ok', state: 'completed' })
    expect(await redis.client.zscore(keys.completed, job.id)).not.toBeNull()
    expect(await redis.client.llen(keys.logs(job.id))).toBe(1)
  })

  it('not judged kept, it goes at once with its log', async () => {
    const job = await fx.queue.add('x', {}, { removeOnComplete: true })
    await redis.client.rpush(keys.logs(job.id), 'a line')
    const [run] = (await take(redis.client, keys, taker, [job.id])).taken
    await finishRuns(redis.client, keys, [{ run: { id: job.id, token: run?.token as string }, action: 'complete', value: '1' }])
    expect(await redis.client.exists(keys.job(job.id), keys.logs(job.id))).toBe(0)
  })
})

describe('a plain run', () => {
  it("is one whose job has none of attemptsMade, keep, deid and parentKey: its finish reads only the token, and every other run's reads them", async () => {
    const plain = await fx.queue.add('x', { n: 1 })
    const removed = await fx.queue.add('x', { n: 2 }, { removeOnComplete: true })
    const deduplicated = await fx.queue.add('x', { n: 3 }, { deduplication: { id: 'only' } })
    const retried = await fx.queue.add('x', { n: 4 }, { attempts: 2 })
    const [firstRun] = (await take(redis.client, keys, taker, [retried.id])).taken
    await finish(redis.client, keys, { id: retried.id, token: firstRun?.token as string }, 'fail', 'no')

    const { taken } = await take(redis.client, keys, taker, [plain.id, removed.id, deduplicated.id, retried.id])
    expect(taken.map((t) => [t.job.id, t.plain])).toEqual([
      [plain.id, true],
      [removed.id, false],
      [deduplicated.id, false],
      [retried.id, false],
    ])

    // Only the plain run's finish reads its job with one HGET, the token alone (MONITOR on the job's key);
    // every other run's reads the fields with it, in one HMGET.
    const finishOne = async (t: (typeof taken)[number]) => {
      const { result, calls } = await commandsOnKey(redis.client, keys.job(t.job.id), () =>
        finishRuns(redis.client, keys, [{ run: { id: t.job.id, token: t.token }, plain: t.plain, action: 'complete', value: '1' }]),
      )
      return { state: result.runs[0]?.state, reads: Object.keys(calls).filter((c) => c === 'hget' || c === 'hmget') }
    }
    const outcomes = []
    for (const t of taken) outcomes.push(await finishOne(t))
    expect(outcomes).toEqual([
      { state: 'completed', reads: ['hget'] },
      { state: 'completed', reads: ['hmget'] },
      { state: 'completed', reads: ['hmget'] },
      { state: 'completed', reads: ['hmget'] },
    ])
    // What each read was for: the job's own retention, its deduplication released, its attempts counted.
    expect(await redis.client.exists(keys.job(removed.id))).toBe(0)
    expect(await fx.queue.getDeduplicationJobId('only')).toBeFalsy()
    // A first attempt's completion stores no attemptsMade (read as 1); a result travels and is kept.
    expect(await redis.client.hmget(keys.job(plain.id), 'attemptsMade', 'state', 'returnValue')).toEqual([null, 'completed', '1'])
    expect((await fx.queue.getJob(plain.id))?.attemptsMade).toBe(1)
    expect(await redis.client.hget(keys.job(retried.id), 'attemptsMade')).toBe('2')
    expect((await fx.queue.getJob(retried.id))?.attemptsMade).toBe(2)
  })

  it('is not read as plain once a job joined a parent while it ran (meta `adopted`): its finish hands off', async () => {
    const child = await fx.queue.add('x', { n: 1 })
    const [run] = (await take(redis.client, keys, taker, [child.id])).taken
    expect(run?.plain).toBe(true)
    await redis.client.hset(keys.job(child.id), 'parentKey', 'emq:{q}:parent', 'parent', '{"id":"parent","queueKey":"emq:q"}')
    await redis.client.hset(keys.meta, 'adopted', '1')
    const reply = await finishRuns(redis.client, keys, [
      { run: { id: child.id, token: run?.token as string }, plain: true, action: 'complete', value: '1' },
    ])
    expect(reply.runs[0]).toMatchObject({ status: 'ok', state: 'completed' })
    expect(reply.runs[0]?.handoff).toBeTruthy()
  })
})

describe('a parent run', () => {
  it('is told by its take (`deps`, sent only for a parent); its finish that removes it sends its flow keys, removed with it', async () => {
    const parent = await fx.queue.add('p', {}, { removeOnComplete: true })
    const other = await fx.queue.add('x', {}, { removeOnComplete: true })
    await redis.client.hset(keys.job(parent.id), 'deps', '1')
    await redis.client.hset(keys.meta, 'parents', '1')
    await redis.client.sadd(keys.dependencies(parent.id), 'emq:{kids}:1')
    await redis.client.hset(keys.processed(parent.id), 'emq:{kids}:2', '"v"')
    const { taken } = await take(redis.client, keys, taker, [parent.id, other.id])
    expect(taken.map((t) => [t.job.id, t.parent])).toEqual([
      [parent.id, true],
      [other.id, false],
    ])
    const reply = await finishRuns(
      redis.client,
      keys,
      taken.map((t) => ({ run: { id: t.job.id, token: t.token }, plain: t.plain, parent: t.parent, action: 'complete', value: '1' })),
    )
    expect(reply.runs.map((r) => r.state)).toEqual(['completed', 'completed'])
    for (const id of [parent.id, other.id]) {
      expect(await redis.client.exists(keys.job(id), keys.logs(id), keys.dependencies(id), keys.processed(id))).toBe(0)
    }
    expect(await redis.client.hexists(keys.meta, 'parents')).toBe(0)
  })

  it('whose job became a parent after its take changes nothing (status `parent`) until it is sent as a parent', async () => {
    const job = await fx.queue.add('p', {}, { removeOnComplete: true })
    const [run] = (await take(redis.client, keys, taker, [job.id])).taken
    expect(run?.parent).toBe(false)
    // adoptChild-4.lua on a running job: `deps`, counted, and meta's `adopted`.
    await fx.queue.add('c', {}, { parent: { id: job.id, queue: fx.queue.qualifiedName } })
    expect(await redis.client.hmget(keys.meta, 'parents', 'adopted')).toEqual(['1', '1'])
    const lease = { id: job.id, token: run?.token as string }
    const first = await finishRuns(redis.client, keys, [{ run: lease, plain: run?.plain === true, action: 'complete', value: '1' }])
    expect(first.runs[0]).toMatchObject({ status: 'parent', state: 'active' })
    expect(await redis.client.hmget(keys.job(job.id), 'state', 'token')).toEqual(['active', lease.token])
    expect(await redis.client.get(keys.lock(job.id))).toBe(lease.token)
    const second = await finishRuns(redis.client, keys, [
      { run: lease, plain: run?.plain === true, parent: true, action: 'complete', value: '1' },
    ])
    expect(second.runs[0]).toMatchObject({ status: 'ok', state: 'completed' })
    expect(await redis.client.exists(keys.job(job.id), keys.dependencies(job.id), keys.lock(job.id))).toBe(0)
    expect(await redis.client.hexists(keys.meta, 'parents')).toBe(0)
  })
})

describe('a finish that asks for a trim', () => {
  it('sends the set\u2019s oldest ids with its first ask, none with a later one (trims lagging behind)', async () => {
    const completeOne = async (kept: number) => {
      await redis.client.del(keys.completed)
      if (kept > 0) await redis.client.zadd(keys.completed, ...Array.from({ length: kept }, (_, i) => [String(1000 + i), `old${i}`]).flat())
      const job = await fx.queue.add('x', {}, { removeOnComplete: 20 })
      const [run] = (await take(redis.client, keys, taker, [job.id])).taken
      const reply = await finishRuns(redis.client, keys, [
        { run: { id: job.id, token: run?.token as string }, action: 'complete', value: '1' },
      ])
      return reply.runs[0]
    }
    // Count 20, slack 10: the 30th kept job is a first ask, with the 10 oldest; the 40th is not.
    expect(await completeOne(29)).toMatchObject({ trim: 'completed', oldest: Array.from({ length: 10 }, (_, i) => `old${i}`) })
    const later = await completeOne(39)
    expect(later?.trim).toBe('completed')
    expect(later?.oldest).toBeUndefined()
    expect(await completeOne(10)).toMatchObject({ trim: undefined })
  })
})
