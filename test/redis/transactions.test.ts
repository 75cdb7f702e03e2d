/**
 * A bulk add and a flow's level go in one MULTI (lib/redis/script-runner.ts evalInTransaction): the first of a
 * script on a client opens with an EVAL, later ones are all EVALSHA; a Redis that lost the script refuses
 * every call of such a transaction, nothing is written, and the transaction goes again with the script's text.
 */
import { describe, expect, it } from 'vitest'
import { FlowProducer, Queue } from '../../lib/index.js'
import { loadScript } from '../../lib/redis/script-runner.js'
import { useRedis } from '../helpers/redis-server.js'

const redis = useRedis()

describe('a transaction of script calls', () => {
  it('sends the script once per client, and again (all or nothing) to a Redis that lost it', async () => {
    // direct: its add and the producer's share one client, whose transactions the test follows
    const queue = new Queue('tx', { connection: redis.client })
    const flows = new FlowProducer({ connection: redis.client })
    try {
      const monitor = await redis.client.duplicate().monitor()
      const flowSha = loadScript('addFlow-10.lua').sha
      const sent: string[] = []
      let seenAll: () => void = () => undefined
      const allSeen = new Promise<void>((resolve) => {
        seenAll = resolve
      })
      // The flow levels' calls: by text (EVAL) or by hash (EVALSHA).
      monitor.on('monitor', (_t: string, args: string[]) => {
        const command = String(args[0]).toLowerCase()
        if (command === 'echo' && args[1] === 'tx-done') seenAll()
        if (command === 'evalsha' && args[1] === flowSha) sent.push('hash')
        if (command === 'eval' && String(args[1]).startsWith('-- addFlow-10.lua')) sent.push('text')
      })
      const flow = { name: 'p', queueName: 'tx', children: [{ name: 'c', queueName: 'tx' }] }
      await queue.addBulk([
        { name: 'a', data: {} },
        { name: 'a', data: {} },
      ])
      await flows.add(flow)
      await queue.addBulk([{ name: 'b', data: {} }])
      await flows.add(flow)
      await redis.client.script('FLUSH')
      await queue.addBulk([{ name: 'c', data: {} }])
      await flows.add(flow)
      await redis.client.echo('tx-done')
      await allSeen
      monitor.disconnect()
      // The first flow: its first level by text, its second by hash; the second flow all by hash; after the
      // flush: refused by hash, sent again with the text, then by hash.
      expect(sent).toEqual(['text', 'hash', 'hash', 'hash', 'hash', 'text', 'hash'])
      expect(await queue.getJobCounts('wait', 'waiting-children')).toEqual({ wait: 7, 'waiting-children': 3 })
    } finally {
      await flows.close()
      await queue.close()
    }
  })
})
