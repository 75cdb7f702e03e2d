/**
 * A worker whose concurrency is in the thousands: the jobs that end together are finished in calls of a
 * bounded size (lib/worker/core.ts MAX_RUNS_PER_FINISH), so no call passes Redis's Lua stack (about 8,000
 * values unpacked into one command) however many runs end in one tick.
 */
import { expect, it } from 'vitest'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 60_000, skipStalledCheck: true } })

const JOBS = 9_000

it(`${JOBS.toLocaleString('en')} runs held at once, then ended in the same tick, all complete and are filed`, async () => {
  await fx.queue.addBulk(Array.from({ length: JOBS }, (_, i) => ({ name: 'x', data: { i } })))
  let release!: () => void
  const gate = new Promise<void>((resolve) => {
    release = resolve
  })
  let started = 0
  let completed = 0
  const failures: unknown[] = []
  const w = fx.worker(
    async () => {
      started++
      await gate
      return 'ok'
    },
    { concurrency: JOBS, removeOnComplete: false },
  )
  w.on('completed', () => completed++)
  w.on('error', (err) => failures.push(err))
  await waitFor(() => started === JOBS, { what: 'every job running', timeoutMs: 60_000 })
  release()
  await waitFor(() => completed === JOBS, { what: 'every job completed', timeoutMs: 60_000 })

  expect(failures).toEqual([])
  expect(await redis.client.zcard(fx.keys.completed)).toBe(JOBS)
  expect(await redis.client.zcard(fx.keys.active)).toBe(0)
}, 120_000)
