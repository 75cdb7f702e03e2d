/** The processor is called as BullMQ's: (job, token, signal), the run's token also as job.token. */
import { expect, it } from 'vitest'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, skipStalledCheck: true } })

it('passes the run\u2019s token (the lease\u2019s value) as the second argument and job.token, and the signal third', async () => {
  const seen: { token?: string; jobToken?: string | undefined; lease?: string | null; signal?: boolean } = {}
  const w = fx.worker(async (job, token, signal) => {
    seen.token = token
    seen.jobToken = job.token
    seen.lease = await redis.client.get(fx.keys.lock(job.id))
    seen.signal = signal instanceof AbortSignal
    return 'ok'
  })
  await Promise.all([nextEvent(w, 'completed'), fx.queue.add('x', {}, { jobId: 't1' })])

  expect(typeof seen.token).toBe('string')
  expect(seen.token).toBe(seen.lease)
  expect(seen.jobToken).toBe(seen.token)
  expect(seen.signal).toBe(true)
})
