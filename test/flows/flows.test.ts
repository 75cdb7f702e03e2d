/**
 * Flows with BullMQ 6.7's meaning, on a real Redis: FlowProducer.add writes a tree (parents in
 * waiting-children), a parent runs once after its last child, with its children's values; children in
 * other queues; grandchildren; the getters and counts; getFlow; a parent's priority and delay.
 */
import { describe, expect, it } from 'vitest'
import { EchoMQError } from '../../lib/index.js'
import { useFlows } from '../helpers/flows.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useFlows(redis)
const { producer, queue, worker } = fx

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

describe('FlowProducer input', () => {
  it('refuses a bad node anywhere in the tree with a typed error, and writes nothing', async () => {
    const p = producer()
    const bad: unknown[] = [
      { name: 'p', queueName: 'bad queue' },
      { name: '', queueName: 'q' },
      { name: 'p', queueName: 'q', children: [{ name: 'c', queueName: 'q', opts: { attempts: -1 } }] },
      { name: 'p', queueName: 'q', children: [{ name: 'c', queueName: 'k', opts: { parent: { id: 'x', queue: 'emq:{q}' } } }] },
      { name: 'p', queueName: 'q', opts: { jobId: 'same' }, children: [{ name: 'c', queueName: 'q', opts: { jobId: 'same' } }] },
      { name: 'p', queueName: 'q', children: [{ name: 'c', queueName: 'q', opts: { jobId: '42' } }] },
      {
        name: 'p',
        queueName: 'q',
        children: [{ name: 'c', queueName: 'q', opts: { failParentOnFailure: true, continueParentOnFailure: true } }],
      },
      { name: 'p', queueName: 'q', children: [{ name: 'c', queueName: 'q', data: { big: 'x'.repeat(2 * 1024 * 1024) } }] },
      { name: 'p', queueName: 'q', children: 'c' },
      { name: 'p', queueName: 'q', colour: 'red' },
      { name: 'p', queueName: 'q', opts: { deduplication: { id: 'd' } } },
      { name: 'p', queueName: 'q', children: Array.from({ length: 10_001 }, () => ({ name: 'c', queueName: 'q' })) },
    ]
    for (const flow of bad) {
      const err = await p.add(flow as never).catch((e: unknown) => e)
      expect(err, JSON.stringify(flow).slice(0, 100)).toBeInstanceOf(EchoMQError)
    }
    const missing = await p.add({ name: 'p', queueName: 'q', opts: { parent: { id: 'none', queue: 'emq:{q}' } } }).catch((e: unknown) => e)
    expect((missing as EchoMQError).code).toBe('ERR_JOB_MISSING')
    expect(await redis.client.keys('emq:{*')).toEqual([])
  })

  it("a bad node's error names it, as a jobId used twice does: its flow and its path of children", async () => {
    const p = producer()
    const leaf = (queueName: string, extra: object = {}) => ({ name: 'c', queueName, ...extra })
    const tree = (bad: object) => ({ name: 'p', queueName: 'q', children: [leaf('q'), { ...leaf('k'), children: [leaf('k'), bad] }] })
    const cases: [object, string, string][] = [
      [leaf('bad queue'), 'ERR_QUEUE_NAME', 'flow 1 child 1 child 1: expected a queue name'],
      [{ name: '', queueName: 'q' }, 'ERR_JOB_NAME', 'flow 1 child 1 child 1: expected a job name'],
      [leaf('q', { prefix: 'bad prefix' }), 'ERR_OPTIONS', 'flow 1 child 1 child 1: expected prefix'],
      [leaf('q', { opts: { attempts: -1 } }), 'ERR_OPTIONS', 'flow 1 child 1 child 1: expected attempts'],
      [leaf('q', { opts: { jobId: 'same' } }), 'ERR_JOB_ID', 'flow 1 child 1 child 1: job "same" of queue q appears twice'],
    ]
    for (const [bad, code, message] of cases) {
      const flows = [{ name: 'p', queueName: 'q', opts: { jobId: 'same' } }, tree(bad)]
      const err = (await p.addBulk(flows as never).catch((e: unknown) => e)) as EchoMQError
      expect([err.code, err.message.slice(0, message.length)]).toEqual([code, message])
    }
    expect(await redis.client.keys('emq:{*')).toEqual([])
  })

  it('adds a flow under an existing job (opts.parent on the root), and addBulk adds several trees', async () => {
    const p = producer()
    const top = await p.add({ name: 'top', queueName: 'q', children: [{ name: 'first', queueName: 'k' }] })
    const [under, other] = await p.addBulk([
      { name: 'sub', queueName: 'k', opts: { parent: { id: top.job.id, queue: 'emq:{q}' } }, children: [{ name: 'leaf', queueName: 'k' }] },
      { name: 'lone', queueName: 'k' },
    ])
    expect(under?.job.parentKey).toBe(`emq:{q}:${top.job.id}`)
    expect(other?.children).toBeUndefined()
    const job = await queue('q').getJob(top.job.id)
    expect(await job?.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 2 })
    const tree = await p.getFlow({ id: top.job.id, queueName: 'q', depth: 2 })
    expect(tree?.children?.map((c) => c.job.name).sort()).toEqual(['first', 'sub'])
    expect(tree?.children?.every((c) => c.children === undefined)).toBe(true)
  })
})

describe('FlowProducer.addBulk with a root under a missing parent', () => {
  it('leaves that root and its tree out, writes the others and returns every tree (BullMQ 6.7); add still refuses', async () => {
    const p = producer()
    const top = await p.add({ name: 'top', queueName: 'q', children: [{ name: 'first', queueName: 'k' }] })
    const orphanOf = { parent: { id: 'gone', queue: 'emq:{q}' } }
    const [orphan, under, lone] = await p.addBulk([
      {
        name: 'orphan',
        queueName: 'k',
        opts: { ...orphanOf, jobId: 'o' },
        children: [{ name: 'o-leaf', queueName: 'k', opts: { jobId: 'ol' } }],
      },
      { name: 'sub', queueName: 'k', opts: { parent: { id: top.job.id, queue: 'emq:{q}' } } },
      { name: 'lone', queueName: 'q' },
    ])
    expect(orphan?.job.id).toBe('o')
    expect(await orphan?.job.getState()).toBe('unknown')
    expect(await queue('k').getJob('ol')).toBeUndefined()
    expect(await queue('q').getJobState(lone?.job.id as string)).toBe('waiting')
    expect(await (await queue('q').getJob(top.job.id))?.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 2 })
    expect(await queue('k').getJobState(under?.job.id as string)).toBe('waiting')

    const refused = await p.add({ name: 'again', queueName: 'k', opts: orphanOf }).catch((e: unknown) => e)
    expect((refused as EchoMQError).code).toBe('ERR_JOB_MISSING')
  })
})
