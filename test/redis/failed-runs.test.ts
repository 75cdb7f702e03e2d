/**
 * What a failed run and a promotion write, and how often they go to the job's hash (Redis counts the commands
 * its scripts run): a failed run reads its job once and writes it once (the attempt, the reason, the stack,
 * the new state and the run's receipt together), whether it goes back to wait, backs off in `delayed` or
 * fails for good; a promotion reads and writes each job once. The outcomes are BullMQ's: attemptsMade,
 * failedReason, stacktrace, job.delay as the backoff, a replayed finish answered from its receipt.
 */
import { describe, expect, it } from 'vitest'
import type { JobFields } from '../../lib/job.js'
import { finish, finishRuns, promote, take } from '../../lib/redis/commands.js'
import { fieldsFromHash } from '../../lib/redis/job-codec.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { commandsOnKey } from '../helpers/commands-on-key.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const keys = queueKeys('emq', 'q')
const fx = useQueue(redis)
const taker = { workerToken: 'wire', leaseMs: 10_000, workerName: 'w' }

/** The commands Redis ran (scripts' included) during `run`, by name. */
async function counted<T>(run: () => Promise<T>): Promise<{ result: T; calls: Record<string, number> }> {
  await redis.client.config('RESETSTAT')
  const result = await run()
  const calls: Record<string, number> = {}
  for (const m of (await redis.client.info('commandstats')).matchAll(/cmdstat_([\w|]+):calls=(\d+)/g)) calls[m[1] as string] = Number(m[2])
  return { result, calls }
}

const onKey = <T>(key: string, run: () => Promise<T>) => commandsOnKey(redis.client, key, run)

const stored = async (id: string): Promise<JobFields> => fieldsFromHash(id, await redis.client.hgetall(keys.job(id)))

describe('a failed run', () => {
  it('back to wait: one read and one write of its job, its record whole; replayed, the same outcome', async () => {
    const job = await fx.queue.add('x', {}, { attempts: 2 })
    const [run] = (await take(redis.client, keys, taker, [job.id])).taken
    const stack = 'Error: "no" \\ /path/ é\n    at x (y.js:1:2)'
    const lease = { id: job.id, token: run?.token as string }

    const { result, calls } = await onKey(keys.job(job.id), () =>
      finishRuns(redis.client, keys, [{ run: lease, plain: run?.plain === true, action: 'fail', value: 'no', stack }]),
    )

    expect(run?.plain).toBe(true)
    expect(result.runs[0]).toMatchObject({ status: 'ok', state: 'wait' })
    // Its token and the failure's fields in one read, then its one write.
    expect(calls).toEqual({ hmget: 1, hset: 1 })
    expect(await stored(job.id)).toMatchObject({ state: 'wait', attemptsMade: 1, failedReason: 'no', lastError: 'no', stacktrace: [stack] })
    expect(await redis.client.hget(keys.job(job.id), 'token')).toMatch(/^=wire:1 wait \d+$/)
    expect(await redis.client.lrange(keys.wait, 0, -1)).toEqual([job.id])

    // The reply was lost and the call came again: the receipt answers, nothing is counted twice.
    const again = await finish(redis.client, keys, lease, 'fail', 'no', undefined, stack)
    expect(again).toMatchObject({ status: 'ok', state: 'wait' })
    expect(await stored(job.id)).toMatchObject({ attemptsMade: 1, stacktrace: [stack] })
    expect(await redis.client.lrange(keys.wait, 0, -1)).toEqual([job.id])
  })

  it('backing off: in `delayed` for its backoff, which is job.delay meanwhile, in the same one write', async () => {
    const job = await fx.queue.add('x', {}, { attempts: 3, backoff: { type: 'exponential', delay: 60_000 } })
    const [run] = (await take(redis.client, keys, taker, [job.id])).taken

    const { result, calls } = await onKey(keys.job(job.id), () =>
      finish(redis.client, keys, { id: job.id, token: run?.token as string }, 'fail', 'no', undefined, 'Error: no'),
    )

    expect(result).toMatchObject({ status: 'ok', state: 'delayed', backoffMs: 60_000 })
    // Not sent as plain: the token is read with the fields every other run reads, and the failure's.
    expect(calls).toEqual({ hmget: 1, hset: 1 })
    const waiting = await stored(job.id)
    expect(waiting).toMatchObject({ state: 'delayed', attemptsMade: 1, failedReason: 'no', lastDelay: 60_000, stacktrace: ['Error: no'] })
    expect(waiting.dueAt).toBe(Math.floor(Number(await redis.client.zscore(keys.delayed, job.id))))
    expect(await redis.client.zscore(keys.marker, 'd')).toBe(String(waiting.dueAt))

    // Promoted, the backoff is no longer job.delay; a second failure waits twice as long and keeps both stacks.
    await redis.client.zadd(keys.delayed, '0', job.id)
    await promote(redis.client, keys, [job.id], false)
    expect(await redis.client.hexists(keys.job(job.id), 'lastDelay')).toBe(0)
    const [second] = (await take(redis.client, keys, taker, [job.id])).taken
    const retried = await finish(
      redis.client,
      keys,
      { id: job.id, token: second?.token as string },
      'fail',
      'again',
      undefined,
      'Error: again',
    )
    expect(retried).toMatchObject({ state: 'delayed', backoffMs: 120_000 })
    expect(await stored(job.id)).toMatchObject({ attemptsMade: 2, lastDelay: 120_000, stacktrace: ['Error: no', 'Error: again'] })
  })

  it('for good: `failed`, its deduplication id released, the stacks kept to stackTraceLimit, in one write', async () => {
    const job = await fx.queue.add('x', {}, { attempts: 2, stackTraceLimit: 1, deduplication: { id: 'once' } })
    const [first] = (await take(redis.client, keys, taker, [job.id])).taken
    await finish(redis.client, keys, { id: job.id, token: first?.token as string }, 'fail', 'one', undefined, 'Error: one')
    const [second] = (await take(redis.client, keys, taker, [job.id])).taken

    const { result, calls } = await onKey(keys.job(job.id), () =>
      finish(redis.client, keys, { id: job.id, token: second?.token as string }, 'fail', 'two', undefined, 'Error: two'),
    )

    expect(result).toMatchObject({ status: 'ok', state: 'failed' })
    expect(calls).toEqual({ hmget: 1, hset: 1 })
    expect(await stored(job.id)).toMatchObject({ state: 'failed', attemptsMade: 2, failedReason: 'two', stacktrace: ['Error: two'] })
    expect(await redis.client.hget(keys.job(job.id), 'token')).toBe(`=${second?.token}`)
    expect(await redis.client.zscore(keys.failed, job.id)).not.toBeNull()
    expect(await fx.queue.getDeduplicationJobId('once')).toBeFalsy()
  })

  it('tells the marker once for all the retries of one call', async () => {
    const a = await fx.queue.add('x', {}, { attempts: 2 })
    const b = await fx.queue.add('x', {}, { attempts: 2 })
    const taken = (await take(redis.client, keys, taker, [a.id, b.id])).taken
    await redis.client.del(keys.marker)

    const { result, calls } = await counted(() =>
      finishRuns(
        redis.client,
        keys,
        taken.map((t) => ({ run: { id: t.job.id, token: t.token }, action: 'fail' as const, value: 'no', stack: 'Error: no' })),
      ),
    )

    expect(result.runs.map((r) => r.state)).toEqual(['wait', 'wait'])
    expect(calls.zadd).toBe(1)
    expect(await redis.client.zscore(keys.marker, '0')).toBe('0')
  })
})

describe('a promotion', () => {
  it('reads and writes each job once; its due time stays in the hash but is read only while it is delayed', async () => {
    for (const id of ['a', 'b', 'c']) await fx.queue.add('x', {}, { jobId: id, delay: 1 })
    await waitFor(async () => Number((await redis.client.zrange(keys.delayed, '-1', '-1', 'WITHSCORES'))[1]) < Date.now() - 5, {
      what: 'the jobs to fall due',
    })

    const { result, calls } = await counted(() => promote(redis.client, keys, ['a', 'b', 'c'], false))

    expect(result.promoted).toBe(3)
    expect([calls.hmget, calls.hset, calls.hdel, calls.zmscore]).toEqual([3, 3, undefined, undefined])
    expect(await redis.client.lrange(keys.wait, 0, -1)).toEqual(['c', 'b', 'a'])
    const job = await fx.queue.getJob('a')
    expect([job?.state, job?.dueAt, job?.delay, job?.opts.delay]).toEqual(['wait', undefined, 0, 1])
    expect(await redis.client.hexists(keys.job('a'), 'dueAt')).toBe(1)
  })

  it('moves a given id that is due even when earlier ones came meanwhile; a given id not due stays', async () => {
    await fx.queue.add('x', {}, { jobId: 'given', delay: 1 })
    await fx.queue.add('x', {}, { jobId: 'later', delay: 3_600_000 })
    // An earlier due job the caller did not read: the first due is not the one given.
    await fx.queue.add('x', {}, { jobId: 'earlier', delay: 1 })
    await redis.client.zadd(keys.delayed, '1', 'earlier')
    await waitFor(async () => Number(await redis.client.zscore(keys.delayed, 'given')) < Date.now() - 5, { what: 'the job to fall due' })

    const { promoted } = await promote(redis.client, keys, ['given', 'later'], false)

    expect(promoted).toBe(1)
    expect(await redis.client.lrange(keys.wait, 0, -1)).toEqual(['given'])
    expect(await redis.client.zrange(keys.delayed, '0', '-1')).toEqual(['earlier', 'later'])
  })
})
