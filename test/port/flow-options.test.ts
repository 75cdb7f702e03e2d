/**
 * BullMQ's tests of a flow's job options (tests/flow.test.ts: removeOnComplete with an age on children,
 * attemptsMade on a chain, priority with grandchildren, priority per queue, a custom backoff strategy, getFlow
 * under the producer's prefix), ported: the cases flow.test.ts does not cover. They run on FLOW_LIBRARIES
 * (adapter.ts). BullMQ's "wait for the grandchildren, then run the children's worker" (autorun: false and a
 * processor's delay) is here: the children's worker is made once the children are all prioritized.
 */
import type { Job, JobNode } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { sweep } from '../../lib/index.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, differs, FLOW_LIBRARIES, first, until, usePort } from './adapter.js'

const redis = useRedis()

const keyOf = (job: Job) => `${job.queueQualifiedName}:${job.id}`
const kids = (node: JobNode | undefined): JobNode[] => node?.children ?? []
const kid = (node: JobNode | undefined, i: number): JobNode => kids(node)[i] as JobNode

describe.each(FLOW_LIBRARIES)('%s: flow options', (name) => {
  const t = usePort(redis, name)
  const parentName = () => `${t.queueName}-parent`
  const grandchildrenName = () => `${t.queueName}-grandchildren`

  it('children removed by their age still give the parent their results', async () => {
    const age = { removeOnComplete: { age: 1 } }
    let lastChildAt = 0
    const worker = t.worker(
      async (job) => {
        // The parent ends over a second after its children: their age has passed when it completes.
        if (job.name === 'parent') await until(lastChildAt, 1200)
        else lastChildAt = performance.now()
        return job.name
      },
      { ...age },
    )
    const tree = await t.flow().add(
      {
        name: 'parent',
        data: {},
        queueName: t.queueName,
        opts: age,
        children: ['child0', 'child1'].map((n) => ({ name: n, data: {}, queueName: t.queueName, opts: age })),
      },
      { queuesOptions: { [t.queueName]: { defaultJobOptions: age } } },
    )
    const processed = first<Record<string, unknown> | undefined>()
    worker.on('completed', async (job) => {
      if (job.name === 'parent') processed.listener((await job.getDependencies()).processed)
    })
    expect(await processed.value).toEqual({ [keyOf(kid(tree, 0).job)]: 'child0', [keyOf(kid(tree, 1).job)]: 'child1' })
    // differs.ageTrimsAtFinish: EchoMQ's limits hold after a sweep of the queue (docs/guide.md, "Retention").
    if (!differs.ageTrimsAtFinish(name)) await sweep(t.connection, t.queueName)
    expect(await t.queue.getCompletedCount()).toBe(1)
  })

  it('a chain of jobs with attempts: 1 begins each run with attemptsMade 0', async () => {
    const opts = { attempts: 1, backoff: { type: 'fixed', delay: 1000 } }
    const done = counted<[Job]>(3)
    t.worker((job) => {
      // BullMQ's check: the first attempt of a job with one attempt is its last.
      if (job.attemptsMade + 1 !== job.opts.attempts) throw new Error(`attemptsMade ${job.attemptsMade}`)
    }).on('completed', done.listener)
    const tree = await t.flow().add({
      name: 'task3',
      data: { status: 'plan' },
      opts,
      queueName: t.queueName,
      children: [
        {
          name: 'task2',
          data: {},
          queueName: t.queueName,
          opts,
          children: [{ name: 'task3', data: { status: 'proposal' }, opts, queueName: t.queueName }],
        },
      ],
    })
    expect(kids(tree)).toHaveLength(1)
    expect((await done.done).map(([job]) => job.name)).toEqual(['task3', 'task2', 'task3'])
    expect(await t.queue.getJobCountByTypes('completed')).toBe(3)
  })

  it('children with grandchildren run by their priority, then the parent (removeOnComplete by queuesOptions)', async () => {
    const values = [{ bar: 'something' }, { baz: 'something' }, { qux: 'something' }]
    const parentQueue = t.queueOf(parentName())
    const tree = await t.flow().add(
      {
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [
          [1, 'baz', 2],
          [2, 'qux', 3],
          [0, 'bar', 1],
        ].map(([idx, foo, priority]) => ({
          name: 'child-job',
          data: { idx, foo },
          queueName: t.queueName,
          opts: { priority: priority as number },
          children: [{ name: 'grandchildren-job', data: {}, queueName: grandchildrenName() }],
        })),
      },
      { queuesOptions: { [parentName()]: { defaultJobOptions: { removeOnComplete: true } } } },
    )
    expect(await tree.job.getState()).toBe('waiting-children')
    expect(kids(tree).map((c) => c.job.data.foo)).toEqual(['baz', 'qux', 'bar'])
    expect(kid(tree, 0).job.parent).toEqual({ id: tree.job.id, queueKey: parentQueue.qualifiedName })
    const grandchildrenDone = counted<[Job]>(3)
    t.worker(() => undefined, { queueName: grandchildrenName() }).on('completed', grandchildrenDone.listener)
    await grandchildrenDone.done
    await waitFor(async () => (await t.queue.getPrioritizedCount()) === 3, { what: 'the children prioritized' })
    const order: number[] = []
    t.worker((job) => {
      order.push(job.data.idx)
      return values[job.data.idx]
    })
    const parentDone = first<[number, number, Job]>()
    t.worker(
      async (job) => [
        Object.keys((await job.getDependencies({ processed: {} })).processed ?? {}).length,
        Object.keys(await job.getChildrenValues()).length,
      ],
      { queueName: parentName() },
    ).on('completed', (job, result) => parentDone.listener([...(result as [number, number]), job]))
    const [processed, childrenValues, parent] = await parentDone.value
    expect(order).toEqual([0, 1, 2])
    expect([processed, childrenValues]).toEqual([3, 3])
    expect(parent.finishedOn).toBeTypeOf('number')
    expect(await parentQueue.getJob(parent.id as string)).toBeUndefined()
    expect(await parentQueue.getJobCounts('completed')).toEqual({ completed: 0 })
  })

  it('children and grandchildren each run by their priority in their own queue', async () => {
    const values = [{ bar: 'something' }, { baz: 'something' }, { qux: 'something' }]
    const node = (order: number, queueName: string) => ({
      name: 'child-job',
      data: { order, foo: ['bar', 'baz', 'qux'][order - 1] },
      queueName,
      opts: { priority: order },
    })
    const tree = await t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: [
        node(1, t.queueName),
        node(2, t.queueName),
        { ...node(3, t.queueName), children: [1, 2, 3].map((order) => node(order, grandchildrenName())) },
      ],
    })
    expect(await tree.job.getState()).toBe('waiting-children')
    const grandchildrenOrder: number[] = []
    const grandchildrenDone = counted<[Job]>(3)
    t.worker(
      (job) => {
        grandchildrenOrder.push(job.data.order)
        return values[job.data.order - 1]
      },
      { queueName: grandchildrenName() },
    ).on('completed', grandchildrenDone.listener)
    await grandchildrenDone.done
    expect(grandchildrenOrder).toEqual([1, 2, 3])
    await waitFor(async () => (await t.queue.getPrioritizedCount()) === 3, { what: 'the children prioritized' })
    const childrenOrder: number[] = []
    t.worker((job) => {
      childrenOrder.push(job.data.order)
      return values[job.data.order - 1]
    })
    const childrenValues = first<Record<string, unknown>>()
    t.worker(async (job) => childrenValues.listener(await job.getChildrenValues()), { queueName: parentName() })
    expect(await childrenValues.value).toEqual(Object.fromEntries(kids(tree).map((c, i) => [keyOf(c.job), values[i]])))
    expect(childrenOrder).toEqual([1, 2, 3])
  })

  it("a child retried after the worker's custom backoff strategy lets the parent run", async () => {
    const tree = await t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: [
        { name: 'child-job', data: { idx: 0, foo: 'bar' }, queueName: t.queueName, opts: { attempts: 3, backoff: { type: 'custom' } } },
      ],
    })
    expect(await tree.job.getState()).toBe('waiting-children')
    expect(kid(tree, 0).job.data.foo).toBe('bar')
    const strategy: number[] = []
    t.worker(
      (job) => {
        if (job.attemptsMade < 1) throw new Error('Not yet!')
        return { bar: 'something' }
      },
      {
        settings: {
          backoffStrategy: (attemptsMade: number) => {
            strategy.push(attemptsMade)
            return attemptsMade * 50
          },
        },
      },
    )
    const ran = first<string>()
    t.worker((job) => ran.listener(job.id as string), { queueName: parentName() })
    expect(await ran.value).toBe(tree.job.id)
    expect(strategy).toEqual([1])
    expect((await t.queue.getJob(kid(tree, 0).job.id as string))?.attemptsMade).toBe(2)
  })

  it("getFlow without a prefix reads under the producer's prefix", async () => {
    const flow = t.flow('custom')
    const original = await flow.add({
      name: 'root-job',
      queueName: parentName(),
      data: {},
      children: [
        {
          name: 'child-job',
          data: { idx: 0, foo: 'bar' },
          queueName: t.queueName,
          children: [
            {
              name: 'child-job',
              data: { idx: 1, foo: 'baz' },
              queueName: t.queueName,
              children: [{ name: 'child-job', data: { idx: 2, foo: 'qux' }, queueName: t.queueName }],
            },
          ],
        },
      ],
    })
    const tree = await flow.getFlow({ id: original.job.id as string, queueName: parentName() })
    expect(await tree.job.isWaitingChildren()).toBe(true)
    expect(kids(tree)).toHaveLength(1)
    expect(kid(tree, 0).job.data.foo).toBe('bar')
    expect(kid(tree, 0).job.queueName).toBe(t.queueName)
    expect(kids(kid(tree, 0))).toHaveLength(1)
    expect(kid(kid(tree, 0), 0).job.data.foo).toBe('baz')
    expect(kid(kid(kid(tree, 0), 0), 0).job.data.foo).toBe('qux')
  })
})
