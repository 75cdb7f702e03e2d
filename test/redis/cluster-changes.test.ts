/**
 * Changing a job and deduplication on a real three-master Redis Cluster, under the key guard: every script
 * and read of these features stays in the queue's slot (no CROSSSLOT, no key outside KEYS).
 */
import type { Cluster } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { DelayedError, type Job, Queue, Worker } from '../../lib/index.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useCluster } from '../helpers/cluster.js'
import { useKeyGuard } from '../helpers/key-guard.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

useKeyGuard()
const cluster = useCluster()
let client: Cluster
beforeAll(() => {
  client = cluster.connect()
})

describe('on a cluster, under the key guard', () => {
  it('deduplicated adds and bulks, the holder read and released; updateData, changePriority, changeDelay, moveToDelayed, extendLock', async () => {
    // direct: on a Redis Cluster whose slots move, which is under test
    const queue = new Queue('cc', { connection: client })
    const errors: unknown[] = []
    let worker: Worker | undefined
    try {
      const a = await queue.add('j', { v: 1 }, { deduplication: { id: 'd' }, priority: 3 })
      expect((await queue.add('j', {}, { deduplication: { id: 'd' } })).id).toBe(a.id)
      const t = await queue.add('j', {}, { deduplication: { id: 't', ttl: 60_000, replace: true }, delay: 60_000 })
      const bulk = await queue.addBulk([
        { name: 'j', data: {}, opts: { deduplication: { id: 'd' } } },
        { name: 'j', data: {}, opts: { deduplication: { id: 't', ttl: 60_000, replace: true }, delay: 60_000 } },
      ])
      expect(bulk[0]?.id).toBe(a.id)
      expect(bulk[1]?.id).not.toBe(t.id)
      expect(await queue.getDeduplicationJobId('t')).toBe(bulk[1]?.id)
      expect(await queue.removeDeduplicationKey('t')).toBe(1)
      await bulk[1]?.changeDelay(30_000)
      expect((await queue.getJob(bulk[1]?.id as string))?.delay).toBe(30_000)
      await a.updateData({ v: 2 })
      await a.changePriority({ priority: 1 })

      let runs = 0
      // direct: on a Redis Cluster whose slots move, which is under test
      worker = new Worker(
        'cc',
        async (job: Job) => {
          runs++
          if (runs === 1) {
            expect(await job.extendLock(job.token as string, 10_000)).toBe(1)
            await job.moveToDelayed(Date.now() + 100, job.token)
            throw new DelayedError()
          }
          return job.data
        },
        { connection: cluster.url, lockDuration: 500 },
      )
      worker.on('error', (err) => errors.push(err))
      const [done, result] = await nextEvent<[Job, unknown]>(worker, 'completed')
      expect(done.id).toBe(a.id)
      expect(result).toEqual({ v: 2 })
      await waitFor(async () => (await queue.getDeduplicationJobId('d')) === null, { what: 'the id released' })
      expect(await client.hget(queueKeys('emq', 'cc').meta, 'de:d')).toBeNull()
      expect(errors).toEqual([])
    } finally {
      await worker?.close()
      await queue.close()
    }
  })
})
