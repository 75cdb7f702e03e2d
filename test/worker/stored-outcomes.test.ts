/**
 * What a run's end leaves in its job's hash, and how it reads back: a first attempt's completion stores no
 * attemptsMade and a null result no returnValue (each field a hash gains costs Redis a scan and a
 * reallocation), yet every reader sees BullMQ's values; a failure's stacktrace is built by the worker (it
 * has the stored list) and stored as it sent it, the newest stackTraceLimit kept.
 */
import { expect, it } from 'vitest'
import { QueueEvents } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, skipStalledCheck: true } })

it('a completion with nothing to return stores neither attemptsMade nor returnValue, and reads as BullMQ reads it', async () => {
  const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
  await events.waitUntilReady()
  try {
    const w = fx.worker((job) => (job.name === 'answer' ? { n: 42 } : undefined))
    const none = await fx.queue.add('none', {})
    const answer = await fx.queue.add('answer', {})
    await expect(none.waitUntilFinished(events, 5_000)).resolves.toBeNull()
    await expect(answer.waitUntilFinished(events, 5_000)).resolves.toEqual({ n: 42 })
    await w.close()

    const keys = fx.keys
    expect(await redis.client.hmget(keys.job(none.id), 'state', 'attemptsMade', 'returnValue')).toEqual(['completed', null, null])
    expect(await redis.client.hmget(keys.job(answer.id), 'attemptsMade', 'returnValue')).toEqual([null, '{"n":42}'])
    expect(await fx.queue.getJob(none.id)).toMatchObject({ attemptsMade: 1, returnvalue: null, returnValue: null })
    expect(await fx.queue.getJob(answer.id)).toMatchObject({ attemptsMade: 1, returnvalue: { n: 42 } })
    // A job still waiting has neither (BullMQ: attemptsMade 0).
    const waiting = await fx.queue.add('later', {}, { delay: 60_000 })
    const stillWaiting = await fx.queue.getJob(waiting.id)
    expect(stillWaiting?.attemptsMade).toBe(0)
    expect(stillWaiting?.returnValue).toBeUndefined()
    // BullMQ's name reads null until the job completes, as BullMQ's Job does: on the job add() gave back too.
    expect(stillWaiting?.returnvalue).toBeNull()
    expect(waiting.returnvalue).toBeNull()
    expect(JSON.parse(JSON.stringify(waiting)).returnvalue).toBeNull()
  } finally {
    await events.close()
  }
})

it('a retried job that completes stores its attempts; its stacktrace is the worker-built list, newest kept', async () => {
  // Characters JSON escapes, written one way by the worker and read back the same.
  const odd = 'quote " slash / back \\ tab \t line\nü 🙂'
  fx.worker((job) => {
    if (job.attemptsMade < 3) throw new Error(`run ${job.attemptsMade + 1}: ${odd}`)
    return 'ok'
  })
  const job = await fx.queue.add('flaky', {}, { attempts: 4, stackTraceLimit: 2 })
  await waitFor(async () => (await fx.queue.getJob(job.id))?.state === 'completed', { what: 'the fourth run completed' })

  const done = await fx.queue.getJob(job.id)
  expect(done).toMatchObject({ attemptsMade: 4, returnvalue: 'ok' })
  expect(done?.stacktrace).toHaveLength(2)
  expect(done?.stacktrace[0]).toContain(`run 2: ${odd}`)
  expect(done?.stacktrace[1]).toContain(`run 3: ${odd}`)
  const stored = await redis.client.hget(fx.keys.job(job.id), 'stacktrace')
  expect(JSON.parse(stored as string)).toEqual(done?.stacktrace)
})

it('a job that keeps no stacks (stackTraceLimit 0) stores none; a final failure keeps its last', async () => {
  fx.worker(() => {
    throw new Error('always')
  })
  const none = await fx.queue.add('none', {}, { attempts: 2, stackTraceLimit: 0 })
  const one = await fx.queue.add('one', {}, { attempts: 2, stackTraceLimit: 1 })
  await waitFor(async () => (await fx.queue.getJob(none.id))?.state === 'failed' && (await fx.queue.getJob(one.id))?.state === 'failed', {
    what: 'both failed for good',
  })
  const keys = fx.keys
  expect(await redis.client.hexists(keys.job(none.id), 'stacktrace')).toBe(0)
  expect(await fx.queue.getJob(none.id)).toMatchObject({ attemptsMade: 2, stacktrace: [], returnvalue: null })
  const last = await fx.queue.getJob(one.id)
  expect(last?.stacktrace).toHaveLength(1)
  expect(last?.stacktrace[0]).toContain('always')
})
