/**
 * Discovery after the registry is lost (a Redis restart without persistence, a failover, a deleted key):
 * every queue that needs the reaper is found and swept again, not only queues with jobs in flight. A
 * queue whose only producer is a job scheduler keeps producing with no worker and no live Queue, because
 * the reaper's sweep is then the only one promoting its iterations.
 */
import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { Discovery } from '../../lib/reaper/discovery.js'
import { registryKey, sweptKeyPattern } from '../../lib/redis/keys.js'
import { useQueues } from '../helpers/fixture.js'
import { useCapturedLogs } from '../helpers/log-lines.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const { open, worker } = useQueues(redis)
const logs = useCapturedLogs()

const context = { getRemainingTimeInMillis: () => 50_000 }
const handlerEnv = () => ({ REDIS_URL: redis.url, METRICS_MODE: 'off', SWEEP_GRACE_MS: '0', IS_LOCAL: 'true' })
const loseRegistry = () => redis.client.del(registryKey('emq'))

describe('discovery after the registry is lost', () => {
  it('a queue whose only producer is a job scheduler keeps producing, swept by the reaper alone', async () => {
    const queue = open('ticks')
    await queue.upsertJobScheduler('every-50ms', { every: 50 }, { name: 'tick' })
    await queue.close()
    await loseRegistry()
    const handler = createHandler(handlerEnv())
    try {
      // Each invocation promotes the due iteration, which makes the next one: the schedule goes on.
      await waitFor(
        async () => {
          await handler({}, context)
          return (await redis.client.llen('emq:{ticks}:wait')) >= 4
        },
        { what: 'four iterations in wait', timeoutMs: 15_000, intervalMs: 60 },
      )
    } finally {
      await handler.close()
    }
    expect(await redis.client.sismember(registryKey('emq'), 'ticks')).toBe(1)
    expect(logs.lines.find((l) => /missing from the registry/.test(String(l.message)))).toMatchObject({ queues: ['ticks'] })
  })

  it('finds delayed-only, waiting-only and prioritized-only queues too; a queue of finished jobs only needs no sweep', async () => {
    const make = async (name: string, opts: object) => {
      const q = open(name)
      await q.add('j', {}, opts)
      await q.close()
    }
    await make('later', { delay: 60_000 })
    await make('backlog', {})
    await make('urgent', { priority: 1 })
    await crashedJobs(redis.client, 'inflight', 1)
    const done = open('done')
    await done.add('j', {})
    const finishing = worker('done', async () => 'ok')
    await waitFor(async () => (await done.counts()).completed === 1, { what: 'the job completed' })
    await Promise.all([finishing.close(), done.close()])
    await loseRegistry()
    const handler = createHandler(handlerEnv())
    try {
      const summary = await handler({}, context)
      expect(Object.keys(summary.queues).sort()).toEqual(['backlog', 'inflight', 'later', 'urgent'])
    } finally {
      await handler.close()
    }
  })

  it('costs one SCAN pass whose pattern leaves out the keys of jobs with numeric ids', async () => {
    const q = open('bulk')
    await q.addBulk(Array.from({ length: 200 }, (_, i) => ({ name: 'j', data: { i } })))
    await q.close()
    const [, keys] = await redis.client.scan('0', 'MATCH', sweptKeyPattern('emq'), 'COUNT', 10_000)
    // The queue's own keys that start with one of the names' initials, and no job hash, lease or log.
    expect(keys.sort()).toEqual(['emq:{bulk}:wait'])
    await loseRegistry()
    expect(await new Discovery('emq').missing(redis.client, [])).toEqual(['bulk'])
  })
})
