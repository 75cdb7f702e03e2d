/**
 * queue.getWorkers() and getWorkersCount() as BullMQ 6.7 answers them, on a real Redis and a real
 * three-master cluster: one entry per worker (its named blocking connection), only this queue's, the
 * worker's name at the end of `rawname`, gone once the worker closed; an idle worker sends nothing to be
 * seen; a Redis that refuses CLIENT LIST gets a typed error, not a made-up worker.
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../lib/index.js'
import { workerNameOf } from '../../lib/queue/workers.js'
import { workerConnectionName } from '../../lib/redis/clients.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useCluster } from '../helpers/cluster.js'
import { useClosing, useQueues } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const { open, worker } = useQueues(redis)
const track = useClosing()
const idle = () => new Promise<never>(() => undefined)

describe('getWorkers on one Redis', () => {
  it("lists each worker of this queue once, with BullMQ's fields, and none of another queue's", async () => {
    const queue = open('gw')
    const other = open('gw2')
    const w1 = worker('gw', idle, { name: 'worker1' })
    worker('gw', idle, { name: 'worker 2/é%' })
    worker('gw2', idle)
    await w1.waitUntilReady()
    await waitFor(async () => (await queue.getWorkersCount()) === 2, { timeoutMs: 5_000 })
    const workers = await queue.getWorkers()
    expect(workers).toHaveLength(2)
    for (const w of workers) {
      expect(w.name).toBe('gw')
      expect(w).toHaveProperty('id')
      expect(w).toHaveProperty('addr')
      expect(w).toHaveProperty('age')
      expect(w).toHaveProperty('idle')
    }
    const names = workers.map((w) => workerNameOf(w.rawname ?? '', 'emq', 'gw')).sort()
    expect(names).toEqual(['worker 2/é%', 'worker1'])
    // BullMQ's own test reads the name as the last ':'-part of rawname.
    expect(workers.map((w) => (w.rawname ?? '').split(':').pop())).toContain('worker1')
    expect(workers[0]?.rawname?.startsWith(`emq:${Buffer.from('gw').toString('base64')}:w:`)).toBe(true)
    await waitFor(async () => (await other.getWorkersCount()) === 1, { timeoutMs: 5_000 })
  })

  it('a worker is gone from the list once it closed', async () => {
    const queue = open('gone')
    const w = worker('gone', idle, { name: 'short-lived' })
    await waitFor(async () => (await queue.getWorkersCount()) === 1, { timeoutMs: 5_000 })
    await w.close()
    await waitFor(async () => (await queue.getWorkersCount()) === 0, { timeoutMs: 5_000 })
  })

  it('an idle worker is seen without sending anything: its blocking connection is named once, at connect', async () => {
    const queue = open('quiet')
    await queue.waitUntilReady()
    await redis.client.config('RESETSTAT')
    worker('quiet', idle, { name: 'quiet-one' })
    await waitFor(async () => (await queue.getWorkersCount()) === 1, { timeoutMs: 5_000 })
    // One CLIENT SETNAME, in the blocking connection's connect handshake; nothing else names or shows it.
    const stats = await redis.client.info('commandstats')
    expect(/cmdstat_client\|setname:calls=(\d+)/.exec(stats)?.[1]).toBe('1')
    const [entry] = await queue.getWorkers()
    // The blocking connection is in BZPOPMIN: the last command it sent is the wait for work.
    expect(entry?.cmd).toBe('bzpopmin')
  })

  it('a Redis user without +client|list gets ERR_NOPERM with what to grant, not a made-up worker', async () => {
    await redis.client.call(
      'ACL',
      'SETUSER',
      'nolist',
      'on',
      '>pw',
      '~*',
      '-@all',
      '+@read',
      '+@write',
      '+@scripting',
      '+@connection',
      '+time',
      '-@dangerous',
      '+info',
    )
    const client = new Redis(`redis://nolist:pw@127.0.0.1:${redis.port}`)
    track({ close: async () => client.disconnect() })
    // direct: a queue on a client of the ACL user under test, not the test's own
    const queue = track(new Queue('acl', { connection: client }))
    const refused = await queue.getWorkers().catch((err: unknown) => err)
    expect(refused).toMatchObject({ code: 'ERR_NOPERM' })
    expect((refused as { hint: string }).hint).toMatch(/\+client\|list/)
    expect((refused as Error).message).toMatch(/list the workers of queue acl/)
  })

  it('names the connection as BullMQ does, and percent-encodes what CLIENT SETNAME cannot hold', () => {
    expect(workerConnectionName('bull', 'q', 'w1')).toBe(`bull:${Buffer.from('q').toString('base64')}:w:w1`)
    expect(workerConnectionName('emq', 'q', 'a b%\n')).toMatch(/:w:a%20b%25%0A$/)
  })
})

describe('getWorkers on a Redis Cluster', () => {
  const cluster = useCluster()

  it("asks every primary: each queue's workers are found on the node of its slot", async () => {
    const client = cluster.connect()
    // Two queues on different masters.
    const owners = new Map<number, string>()
    for (let i = 0; owners.size < 2 && i < 200; i++) {
      const name = `cw${i}`
      const owner = await cluster.ownerOf(await cluster.slotOf(queueKeys('emq', name).wait))
      if (!owners.has(owner)) owners.set(owner, name)
    }
    const [a, b] = [...owners.values()] as [string, string]
    // direct: queues and workers on a Redis Cluster (its URL or client), which is under test
    const qa = track(new Queue(a, { connection: client }))
    const qb = track(new Queue(b, { connection: client })) // direct: as above
    track(new Worker(a, idle, { connection: cluster.url, name: 'on-a-1' })) // direct: as above
    track(new Worker(a, idle, { connection: client, name: 'on-a-2' })) // direct: as above
    track(new Worker(b, idle, { connection: cluster.url, name: 'on-b' })) // direct: as above
    await waitFor(async () => (await qa.getWorkersCount()) === 2 && (await qb.getWorkersCount()) === 1, { timeoutMs: 10_000 })
    const names = (await qa.getWorkers()).map((w) => workerNameOf(w.rawname ?? '', 'emq', a)).sort()
    expect(names).toEqual(['on-a-1', 'on-a-2'])
    const [onB] = await qb.getWorkers()
    expect(Number(onB?.addr?.split(':').pop())).toBeGreaterThan(0)
    // A Queue's first call, before its cluster client learnt the nodes, still asks every primary.
    const fresh = track(new Queue(a, { connection: cluster.url })) // direct: a Queue's first call on a cluster URL is under test
    expect(await fresh.getWorkersCount()).toBe(2)
  })
})
