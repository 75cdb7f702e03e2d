/**
 * A worker's removeOnComplete / removeOnFail as BullMQ's KeepJobs (true, false, a count, or { count, age }
 * with age in SECONDS), for the jobs that have no retention of their own; a job's own wins.
 */
import { expect, it } from 'vitest'
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
