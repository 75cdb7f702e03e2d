/**
 * Flows with BullMQ 6.7's meaning, on a real Redis: FlowProducer.add writes a tree (parents in
 * waiting-children), a parent runs once after its last child, with its children's values; children in
 * other queues; grandchildren; the getters and counts; getFlow; a parent's priority and delay.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { FlowProducer, type Job, Queue, Worker } from '../../lib/index.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const open: { close(): Promise<unknown> }[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()))
})
const producer = () => {
  const p = new FlowProducer({ connection: redis.client })
  open.push(p)
  return p
}
const queue = (name: string) => {
  const q = new Queue(name, { connection: redis.client })
  open.push(q)
  return q
}
const worker = (name: string, fn: (job: Job) => unknown) => {
  const w = new Worker(name, fn, { connection: redis.url, lockDuration: 1_000 })
  open.push(w)
  return w
}

describe('FlowProducer.add', () => {
  it('runs the children, then the parent once, with their values', async () => {
    const flow = await producer().add({
      name: 'parent',
      queueName: 'parents',
      data: { p: 1 },
      children: [
        { name: 'c1', queueName: 'kids', data: { n: 1 } },
        { name: 'c2', queueName: 'kids', data: { n: 2 } },
      ],
    })
    expect(flow.job.state).toBe('waiting-children')
    expect(flow.children?.map((c) => c.job.parentKey)).toEqual([`emq:{parents}:${flow.job.id}`, `emq:{parents}:${flow.job.id}`])
    const parents = queue('parents')
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    expect(await parents.getJobCounts('waiting-children')).toEqual({ 'waiting-children': 1 })
    expect((await parents.getWaitingChildren()).map((j) => j.id)).toEqual([flow.job.id])
    const parentJob = await parents.getJob(flow.job.id)
    expect(await parentJob?.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 2, ignored: 0, failed: 0 })

    const parentRuns: unknown[] = []
    worker('kids', (job) => (job.data as { n: number }).n * 10)
    worker('parents', async (job) => {
      parentRuns.push(await job.getChildrenValues())
      return 'done'
    })
    await waitFor(async () => (await parents.getJobState(flow.job.id)) === 'completed', { what: 'the parent completed' })
    expect(parentRuns).toEqual([
      {
        [`emq:{kids}:${flow.children?.[0]?.job.id}`]: 10,
        [`emq:{kids}:${flow.children?.[1]?.job.id}`]: 20,
      },
    ])
    const kid = await queue('kids').getJob(flow.children?.[0]?.job.id as string)
    expect(kid?.parent).toEqual({ id: flow.job.id, queueKey: 'emq:{parents}' })
    expect(kid?.opts.parent).toEqual({ id: flow.job.id, queue: 'emq:{parents}' })
    expect(await redis.client.hlen('emq:{kids}:handoffs')).toBe(0)
  })

  it('runs a tree three levels deep bottom-up, each parent once', async () => {
    const flow = await producer().add({
      name: 'root',
      queueName: 'a',
      children: [{ name: 'mid', queueName: 'b', children: [{ name: 'leaf', queueName: 'a', data: { x: 1 } }] }],
    })
    const order: string[] = []
    worker('a', (job) => {
      order.push(job.name)
      return job.name
    })
    worker('b', async (job) => {
      order.push(job.name)
      return Object.values(await job.getChildrenValues())
    })
    await waitFor(async () => (await queue('a').getJobState(flow.job.id)) === 'completed', { what: 'the root completed' })
    expect(order).toEqual(['leaf', 'mid', 'root'])
    const mid = await queue('b').getJob(flow.children?.[0]?.job.id as string)
    expect(mid?.returnValue).toEqual(['leaf'])
    const tree = await producer().getFlow({ id: flow.job.id, queueName: 'a' })
    expect(tree?.job.name).toBe('root')
    expect(tree?.children?.[0]?.job.name).toBe('mid')
    expect(tree?.children?.[0]?.children?.[0]?.job.name).toBe('leaf')
  })
})
