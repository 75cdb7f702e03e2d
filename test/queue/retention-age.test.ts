/**
 * removeOnComplete / removeOnFail as BullMQ 6.7 reads them: `age` in seconds (not ms), a number as a
 * count, `limit` accepted. The age reaches the scripts as the user wrote it and becomes ms in one place
 * (lua/includes/retention.lua), so the sweep and the worker's trims both read an hour as an hour.
 */
import { describe, expect, it } from 'vitest'
import { EchoMQError, type Job, sweep } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

/** Runs job `id` to its end with the given options, then dates its finish `agoMs` back in `set`. */
async function finishedAgo(id: string, opts: object, agoMs: number, set: 'completed' | 'failed' = 'completed'): Promise<void> {
  const w = fx.worker(() => {
    if (set === 'failed') throw new Error('boom')
    return 'ok'
  })
  const done = nextEvent<[Job]>(w, set)
  await fx.queue.add('x', {}, { jobId: id, attempts: 1, ...opts })
  await done
  await w.close()
  const score = Number(await redis.client.zscore(fx.keys[set], id))
  await redis.client.zadd(fx.keys[set], score - agoMs, id)
}

describe('retention age is in seconds (BullMQ)', () => {
  it('{ age: 3600 } keeps a job that finished 5 s ago: an hour, not 3.6 s', async () => {
    await finishedAgo('hour', { removeOnComplete: { age: 3600 } }, 5_000)
    await sweep(redis.client, 'q')
    expect(await fx.queue.getJobState('hour')).toBe('completed')
    expect((await fx.queue.getJob('hour'))?.opts?.removeOnComplete).toEqual({ age: 3600 })
  })

  it('{ age: 4 } removes a job that finished 5 s ago, at the next sweep', async () => {
    await finishedAgo('four', { removeOnComplete: { age: 4 } }, 5_000)
    await sweep(redis.client, 'q')
    expect(await fx.queue.getJobState('four')).toBe('unknown')
  })

  it('removeOnFail { age, count } reads the same way', async () => {
    await finishedAgo('f1', { removeOnFail: { age: 60, count: 10 } }, 30_000, 'failed')
    await sweep(redis.client, 'q')
    expect(await fx.queue.getJobState('f1')).toBe('failed')
    await redis.client.zadd(fx.keys.failed, Date.now() - 61_000, 'f1')
    await waitFor(async () => (await sweep(redis.client, 'q')) && (await fx.queue.getJobState('f1')) === 'unknown', {
      what: 'the failed job past 60 s to go',
    })
  })

  it('a fraction of a second is kept to the ms; limit is accepted (BullMQ KeepJobs)', async () => {
    const job = await fx.queue.add('x', {}, { jobId: 'frac', removeOnComplete: { age: 0.25, count: 5, limit: 100 } })
    expect((await fx.queue.getJob(job.id as string))?.opts?.removeOnComplete).toEqual({ count: 5, age: 0.25 })
  })

  it('the defaults are a day and 7 days, stated in seconds', async () => {
    const job = await fx.queue.add('x', {}, { jobId: 'dflt' })
    const read = await fx.queue.getJob('dflt')
    expect(read?.opts?.removeOnComplete).toEqual({ count: 1000, age: 86_400 })
    expect(read?.opts?.removeOnFail).toEqual({ count: 10_000, age: 604_800 })
    expect(job.id).toBe('dflt')
  })

  it('an age past a year (in seconds) is refused, naming the unit, and nothing is added', async () => {
    const err = await fx.queue.add('x', {}, { jobId: 'ms', removeOnComplete: { age: 86_400_000 } }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).message).toMatch(/removeOnComplete\.age.*seconds/)
    expect(await fx.queue.getJobState('ms')).toBe('unknown')
  })
})
