/**
 * BullMQ's tests of removing parents and children (tests/flow.test.ts: `.remove`, removeChildDependency),
 * ported, run on both libraries (FLOW_LIBRARIES, adapter.ts). BullMQ's
 * "locked job in the tree" takes the child with worker.getNextJob (manual processing, not in EchoMQ); here a
 * worker holds it running.
 */
import type { FlowJob, Job, JobNode } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { differs, FLOW_LIBRARIES, first, gate, usePort } from './adapter.js'

const redis = useRedis()

const keyOf = (job: Job) => `${job.queueQualifiedName}:${job.id}`
const kids = (node: JobNode | undefined): JobNode[] => node?.children ?? []
const kid = (node: JobNode | undefined, i: number): JobNode => kids(node)[i] as JobNode

describe.each(FLOW_LIBRARIES)('%s: removing flows', (name) => {
  const t = usePort(redis, name)
  const parentName = () => `${t.queueName}-parent`
  const child = (foo: string, children?: Omit<FlowJob, 'queueName'>[]) => ({
    name: 'child-job',
    data: { foo },
    ...(children ? { children: children.map((c) => ({ ...c, queueName: t.queueName })) } : {}),
  })
  /** A flow of a parent (in parentName()) and `children` (in the test's queue, theirs too). */
  const flowOf = (children: Omit<FlowJob, 'queueName'>[]) =>
    t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: children.map((c) => ({
        ...c,
        queueName: t.queueName,
        ...(c.children ? { children: c.children.map((g) => ({ ...g, queueName: t.queueName })) } : {}),
      })),
    })
  const nested = () => flowOf([child('bar'), child('baz', [child('qux')])])

  describe('job.remove() on a parent', () => {
    it('removes its children and grandchildren', async () => {
      const tree = await nested()
      expect(await tree.job.getState()).toBe('waiting-children')
      expect(await kid(tree, 0).job.getState()).toBe('waiting')
      expect(await kid(tree, 1).job.getState()).toBe('waiting-children')
      expect(await kid(kid(tree, 1), 0).job.getState()).toBe('waiting')
      for (const c of kids(tree))
        expect((await t.queue.getJob(c.job.id as string))?.parent).toEqual({ id: tree.job.id, queueKey: tree.job.queueQualifiedName })

      await tree.job.remove()
      expect(await t.queueOf(parentName()).getJob(tree.job.id as string)).toBeUndefined()
      for (const c of kids(tree)) expect(await t.queue.getJob(c.job.id as string)).toBeUndefined()
      expect(await kid(tree, 0).job.getState()).toBe('unknown')
      expect(await kid(tree, 1).job.getState()).toBe('unknown')
      expect(await kid(kid(tree, 1), 0).job.getState()).toBe('unknown')
      expect(await tree.job.getState()).toBe('unknown')
      expect(await t.queue.getJobCountByTypes('waiting')).toBe(0)
    })

    it('with removeChildren: false, leaves the children', async () => {
      const tree = await nested()
      await tree.job.remove({ removeChildren: false })
      expect(await t.queueOf(parentName()).getJob(tree.job.id as string)).toBeUndefined()
      for (const c of kids(tree)) expect(await t.queue.getJob(c.job.id as string)).toBeDefined()
      expect(await kid(tree, 0).job.getState()).toBe('waiting')
      expect(await kid(tree, 1).job.getState()).toBe('waiting-children')
      expect(await tree.job.getState()).toBe('unknown')
      expect(await t.queue.getJobCountByTypes('waiting')).toBe(2)
    })

    it('removes its processed children too', async () => {
      // One child completes; the other waits out a delay, so the parent is still waiting for it.
      const tree = await flowOf([child('bar'), { ...child('baz'), opts: { delay: 60_000 } }])
      const done = first<Job>()
      t.worker(() => 'ok').on('completed', done.listener)
      expect((await done.value).id).toBe(kid(tree, 0).job.id)
      expect(await tree.job.getDependenciesCount({ processed: true, unprocessed: true })).toEqual({ processed: 1, unprocessed: 1 })
      await tree.job.remove()
      for (const c of kids(tree)) expect(await t.queue.getJob(c.job.id as string)).toBeUndefined()
      expect(await t.queue.getJobCounts('completed', 'delayed', 'waiting')).toEqual({ completed: 0, delayed: 0, waiting: 0 })
      expect(await tree.job.getState()).toBe('unknown')
    })

    it('refuses, and removes nothing, while a job of the tree runs', async () => {
      const tree = await flowOf([child('bar'), child('baz')])
      const hold = gate()
      const running = first<string>()
      t.worker(async (job) => {
        running.listener(job.id as string)
        await hold.passed
      })
      const runningId = await running.value
      expect(runningId).toBe(kid(tree, 0).job.id)
      await differs.refused(
        name,
        tree.job.remove(),
        `Job ${tree.job.id} could not be removed because it is locked by another worker`,
        // EchoMQ: ERR_JOB_ACTIVE for a job in flight (docs/migrating-from-bullmq-queue.md, `job.remove()`).
        { code: 'ERR_JOB_ACTIVE', mentions: String(tree.job.id) },
      )
      expect(await tree.job.getState()).toBe('waiting-children')
      expect(await kid(tree, 0).job.getState()).toBe('active')
      expect(await kid(tree, 1).job.getState()).toBe('waiting')
      hold.open()
    })
  })

  describe('job.remove() on a child', () => {
    it('moves each parent to wait as its last child goes, from the deepest up', async () => {
      const tree = await t.flow().add({
        name: 'root-job',
        queueName: parentName(),
        data: {},
        children: [
          {
            ...child('bar'),
            queueName: t.queueName,
            children: [{ ...child('baz'), queueName: t.queueName, children: [{ ...child('qux'), queueName: t.queueName }] }],
          },
        ],
      })
      for (const node of [kid(kid(tree, 0), 0), kid(tree, 0), tree]) {
        expect(await node.job.getState()).toBe('waiting-children')
        await kid(node, 0).job.remove()
        expect(await node.job.getState()).toBe('waiting')
      }
    })

    it('moves the parent to wait only when all its children are gone', async () => {
      const tree = await flowOf([child('bar'), child('baz')])
      await kid(tree, 0).job.remove()
      expect(await kid(tree, 0).job.getState()).toBe('unknown')
      expect(await tree.job.getState()).toBe('waiting-children')
      await kid(tree, 1).job.remove()
      expect(await kid(tree, 1).job.getState()).toBe('unknown')
      expect(await tree.job.getState()).toBe('waiting')
    })
  })

  describe('removeChildDependency', () => {
    it("the last child's moves the parent to wait; the parent then runs with no dependency", async () => {
      const tree = await t
        .flow()
        .add({ name: 'parent', data: {}, queueName: t.queueName, children: [{ name: 'child0', data: {}, queueName: t.queueName }] })
      const only = kid(tree, 0).job
      expect(await only.removeChildDependency()).toBe(true)
      expect(only.parent).toBeUndefined()
      expect(only.parentKey).toBeUndefined()
      expect(await tree.job.getState()).toBe('waiting')
      const counts = first<unknown>()
      t.worker(() => undefined).on('completed', async (job) => {
        if (job.name === 'parent') counts.listener(await job.getDependenciesCount())
      })
      expect(await counts.value).toEqual({ processed: 0, unprocessed: 0, ignored: 0, failed: 0 })
    })

    it('is kept: the child read again has no parent', async () => {
      const tree = await t
        .flow()
        .add({ name: 'parent', data: {}, queueName: t.queueName, children: [{ name: 'child0', data: {}, queueName: t.queueName }] })
      expect(await kid(tree, 0).job.removeChildDependency()).toBe(true)
      const again = await t.queue.getJob(kid(tree, 0).job.id as string)
      expect(again?.parent).toBeUndefined()
      expect(again?.parentKey).toBeUndefined()
    })

    it('with other children pending, the parent keeps waiting for them', async () => {
      const tree = await t.flow().add({
        name: 'parent',
        data: {},
        queueName: t.queueName,
        children: ['child0', 'child1'].map((n) => ({ name: n, data: {}, queueName: t.queueName })),
      })
      expect(await kid(tree, 0).job.removeChildDependency()).toBe(true)
      expect(kid(tree, 0).job.parentKey).toBeUndefined()
      expect(await tree.job.getState()).toBe('waiting-children')
      const counts = first<unknown>()
      t.worker(() => undefined).on('completed', async (job) => {
        if (job.name === 'parent') counts.listener(await job.getDependenciesCount())
      })
      expect(await counts.value).toMatchObject({ unprocessed: 0, processed: 1 })
    })

    it('refuses when the parent is gone', async () => {
      const tree = await flowOf([child('bar'), child('baz')])
      await tree.job.remove({ removeChildren: false })
      const first0 = kid(tree, 0).job
      await differs.refused(name, first0.removeChildDependency(), `Missing key for parent job ${first0.parentKey}. removeChildDependency`, {
        code: 'ERR_JOB_MISSING',
        mentions: keyOf(tree.job),
      })
    })

    it('refuses when the child is gone', async () => {
      const tree = await flowOf([child('bar'), child('baz')])
      const first0 = kid(tree, 0).job
      await first0.remove()
      await differs.missingJob(name, first0.removeChildDependency(), first0.id as string, 'removeChildDependency')
    })
  })

  describe('removeUnprocessedChildren', () => {
    it('removes the children not started, keeps the completed, failed and running ones', async () => {
      const tree = await flowOf([
        child('done'),
        child('fails'),
        child('runs'),
        { ...child('prioritized'), opts: { priority: 1 } },
        { ...child('delayed'), opts: { delay: 60_000 } },
        child('waits'),
        child('parent', [child('grandchild')]),
      ])
      const hold = gate()
      const running = first<string>()
      // One job at a time: 'done' completes, 'fails' fails, 'runs' is held running while the test removes.
      t.worker(async (job) => {
        if (job.data.foo === 'fails') throw new Error('failed job')
        if (job.data.foo === 'runs') {
          running.listener(job.id as string)
          await hold.passed
        }
      })
      expect(await running.value).toBe(kid(tree, 2).job.id)
      const before = new Map<string, string>()
      for (const c of kids(tree)) before.set(c.job.id as string, await c.job.getState())
      expect([before.get(kid(tree, 0).job.id as string), before.get(kid(tree, 1).job.id as string)]).toEqual(['completed', 'failed'])
      await tree.job.removeUnprocessedChildren()
      for (const c of kids(tree)) {
        const again = await t.queue.getJob(c.job.id as string)
        const was = before.get(c.job.id as string) as string
        if (['completed', 'failed', 'active'].includes(was)) {
          expect(again?.parent, `${c.job.data.foo} (${was})`).toEqual({ id: tree.job.id, queueKey: tree.job.queueQualifiedName })
        } else expect(again, `${c.job.data.foo} (${was})`).toBeUndefined()
      }
      hold.open()
    })

    it('removes nothing once every child completed', async () => {
      const tree = await flowOf([child('a'), child('b'), child('c'), child('parent', [child('grandchild')])])
      const parentDone = first<Job>()
      t.worker(() => undefined, { queueName: parentName() }).on('completed', parentDone.listener)
      t.worker(() => undefined)
      await parentDone.value
      expect(await t.queue.getJobCountByTypes('completed')).toBe(5)
      await tree.job.removeUnprocessedChildren()
      expect(await t.queue.getJobCountByTypes('completed')).toBe(5)
    })
  })

  it('removing a parent with a grandparent removes its children, not the grandparent', async () => {
    const grandparentQueue = t.queueOf(`${t.queueName}-grandparent`)
    const grandparent = await grandparentQueue.add('grandparent', {})
    const tree = await t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: [{ ...child('bar'), queueName: t.queueName }],
      opts: { parent: { id: grandparent.id as string, queue: grandparent.queueQualifiedName } },
    })
    await tree.job.remove()
    expect(await kid(tree, 0).job.getState()).toBe('unknown')
    expect(await tree.job.getState()).toBe('unknown')
    expect(await grandparentQueue.getJob(grandparent.id as string)).toBeDefined()
    expect(await grandparent.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 0 })
  })
})
