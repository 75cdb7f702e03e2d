/**
 * A worker's removeOnComplete / removeOnFail as BullMQ's KeepJobs (true, false, a count, or { count, age }
 * with age in SECONDS), for the jobs that have no retention of their own; a job's own wins.
 */
import { expect, it } from 'vitest'
import type { Job } from '../../lib/index.js'
import { trim } from '../../lib/redis/commands.js'
import { trimFinished } from '../../lib/retention.js'
import { monitorDuring } from '../helpers/commands-on-key.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, skipStalledCheck: true } })

it('removeOnComplete: true removes a job without its own retention as it completes; a job\u2019s own wins', async () => {
  const w = fx.worker(() => 'ok', { removeOnComplete: true })
  const done: string[] = []
  w.on('completed', (job) => done.push(job.id))
  await fx.queue.add('x', {}, { jobId: 'gone' })
  await fx.queue.add('x', {}, { jobId: 'kept', removeOnComplete: false })
  await waitFor(() => done.length === 2, { what: 'both jobs done' })

  expect(await redis.client.exists(fx.keys.job('gone'))).toBe(0)
  expect(await fx.queue.getJob('kept')).toMatchObject({ state: 'completed' })
})

it('removeOnComplete: 0 (a count of none, as BullMQ reads it) removes a job at once, its log too: the job\u2019s own and the worker\u2019s', async () => {
  const w = fx.worker(
    async (job) => {
      await job.log('a line')
      return 'ok'
    },
    { removeOnComplete: 0 },
  )
  const done: string[] = []
  w.on('completed', (job) => done.push(job.id))
  await fx.queue.add('x', {}, { jobId: 'by-worker' })
  await fx.queue.add('x', {}, { jobId: 'by-job', removeOnComplete: 0 })
  await waitFor(() => done.length === 2, { what: 'both jobs done' })

  for (const id of ['by-worker', 'by-job']) {
    expect(await redis.client.exists(fx.keys.job(id), fx.keys.logs(id))).toBe(0)
  }
  expect(await redis.client.zcard(fx.keys.completed)).toBe(0)
})

it('{ count, age }: age counts seconds, as BullMQ\u2019s (an hour is kept an hour, not 3.6 s)', async () => {
  const w = fx.worker(
    () => {
      throw new Error('no')
    },
    { removeOnComplete: { age: 3600 }, removeOnFail: { count: 5, age: 86_400 } },
  )
  const failed: string[] = []
  w.on('failed', (job) => failed.push(job.id))
  await fx.queue.add('x', {}, { jobId: 'f1' })
  await waitFor(() => failed.length === 1, { what: 'the job failed' })

  // Stored as given, in seconds, as a job's own retention is: lua/includes/retention.lua makes it ms.
  expect(await redis.client.hget(fx.keys.meta, 'keepFailed')).toBe('5,86400')
  expect(await fx.queue.getJob('f1')).toMatchObject({ state: 'failed' })
})

it('refuses a bad worker retention before any Redis call', () => {
  for (const removeOnComplete of [-1, { age: -5 }, { count: 1.5 }, { keep: 1 }, 'all']) {
    expect(() => fx.worker(() => 'ok', { removeOnComplete } as never)).toThrow(expect.objectContaining({ code: 'ERR_OPTIONS' }))
  }
})

it('a worker\u2019s trim stops near the count (the jobs that finished meanwhile go with its next one); the sweep\u2019s trims exactly', async () => {
  // Count 50: slack 10, near is within 5 past it. 153 kept jobs: one batch of 100 leaves 53.
  await redis.client.hset(fx.keys.meta, 'keepCompleted', '50,')
  await redis.client.zadd(fx.keys.completed, ...Array.from({ length: 153 }, (_, i) => [String(1000 + i), `j${i}`]).flat())

  const byWorker = await trimFinished(redis.client, fx.keys, 'completed', undefined, true)
  expect(byWorker).toBe(100)
  expect(await redis.client.zcard(fx.keys.completed)).toBe(53)

  const exact = await trimFinished(redis.client, fx.keys, 'completed')
  expect(exact).toBe(3)
  expect(await redis.client.zcard(fx.keys.completed)).toBe(50)
  expect(await redis.client.zrange(fx.keys.completed, '0', '0')).toEqual(['j103'])
})

it('a trim re-checks its candidates: one no longer among the oldest is neither removed nor counted; a score is read only for the age', async () => {
  await redis.client.zadd(fx.keys.completed, ...Array.from({ length: 5 }, (_, i) => [String(1000 + i), `j${i}`]).flat())
  for (const id of ['j0', 'j1', 'gone']) await redis.client.hset(fx.keys.job(id), 'state', id === 'gone' ? 'wait' : 'completed')
  await redis.client.zrem(fx.keys.completed, 'j1') // removed meanwhile (by another trim, or an operator)
  await redis.client.hset(fx.keys.meta, 'keepCompleted', '2,')

  const step = await trim(redis.client, fx.keys, 'completed', ['gone', 'j0', 'j1', 'j2', 'j3', 'j4'])

  expect(step).toEqual({ removed: 2, done: true, near: true })
  expect(await redis.client.exists(fx.keys.job('gone'))).toBe(1) // never in the set: its hash stays
  expect(await redis.client.exists(fx.keys.job('j1'))).toBe(1) // left the set before: not this trim's to remove
  expect(await redis.client.zrange(fx.keys.completed, '0', '-1')).toEqual(['j3', 'j4']) // j0 and j2 went
  expect(await redis.client.exists(fx.keys.job('j0'))).toBe(0)

  // Within the count, the age decides, job by job from the oldest: j3 finished at 1003 ms (long ago), j4 now.
  await redis.client.zadd(fx.keys.completed, String(Date.now()), 'j4')
  await redis.client.hset(fx.keys.meta, 'keepCompleted', '2,3600')
  expect(await trim(redis.client, fx.keys, 'completed', ['j3', 'j4'])).toEqual({ removed: 1, done: true, near: true })
  expect(await redis.client.zrange(fx.keys.completed, '0', '-1')).toEqual(['j4'])
})

it.each([
  // Count 20: slack 10, so the 30th completion asks for a trim, with the 10 oldest ids; the trim removes them.
  { set: 'completed', option: 'removeOnComplete', processor: () => 'ok', jobs: 35, left: 25 },
  {
    set: 'failed',
    option: 'removeOnFail',
    processor: () => {
      throw new Error('no')
    },
    jobs: 30,
    left: 20,
  },
] as const)(
  'a finish that asks for a trim of `$set` sends its oldest ids with it: the worker\u2019s trim reads none of its own',
  async ({ set, option, processor, jobs, left }) => {
    const ended: string[] = []
    // Commands clients (not scripts) read the set's oldest ids with (lib/retention.ts oldestIds).
    const reads: string[][] = []
    await monitorDuring(
      redis.client,
      (name, args, source) => {
        if (source !== 'lua' && name === 'zrange' && args[1] === fx.keys[set]) reads.push(args)
      },
      async () => {
        const w = fx.worker(processor, { [option]: 20 })
        w.on(set, (job: Job) => ended.push(job.id))
        await fx.queue.addBulk(Array.from({ length: jobs }, (_, i) => ({ name: 'x', data: {}, opts: { jobId: `j${i}` } })))
        await waitFor(() => ended.length === jobs, { what: `${jobs} jobs ${set}` })
        await waitFor(async () => (await redis.client.zcard(fx.keys[set])) === left, { what: 'the trim' })
        await w.close()
      },
    )

    // The trim's candidates came with the finish.
    expect(reads).toEqual([])
    // The jobs it removed went with their hashes.
    expect(await redis.client.exists(...Array.from({ length: jobs }, (_, i) => fx.keys.job(`j${i}`)))).toBe(left)
  },
)
