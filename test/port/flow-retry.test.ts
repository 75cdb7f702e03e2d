/**
 * BullMQ's tests of a flow's failed children retried or removed (tests/flow.test.ts: `.retry` of a
 * continueParentOnFailure child and of a completed child; failParentOnFailure under a removeDependencyOnFailure
 * or ignoreDependencyOnFailure child; `.remove` of a tree with unsuccessful children), ported: the cases the
 * other flow files do not cover. They run on FLOW_LIBRARIES (adapter.ts). BullMQ holds a child running with
 * a processor's delay while the other is retried; here a gate holds it.
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { FLOW_LIBRARIES, first, gate, usePort } from './adapter.js'

const redis = useRedis()

const keyOf = (job: Job) => `${job.queueQualifiedName}:${job.id}`

describe.each(FLOW_LIBRARIES)('%s: retrying and removing failed children', (name) => {
  const t = usePort(redis, name)
  const parentName = () => `${t.queueName}-parent`
  const grandchildrenName = () => `${t.queueName}-grandchildren`
  const fail = () => {
    throw new Error('failed')
  }

  // The gap of a retried ignoreDependencyOnFailure child: EchoMQ keeps a continueParentOnFailure failure among the ignored too.
  it('a failed continueParentOnFailure child retried is a dependency again', async () => {
    const tree = await t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: [{ name: 'child-job', data: { foo: 'bar' }, queueName: t.queueName, opts: { continueParentOnFailure: true, attempts: 1 } }],
    })
    const failed = first<Job | undefined>()
    const worker = t.worker(fail)
    worker.on('failed', failed.listener)
    const failedId = (await failed.value)?.id as string
    await worker.close()
    const child = await t.queue.getJob(failedId)
    await child?.retry('failed')
    expect(await child?.getState()).toBe('waiting')
    expect(await tree.job.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 1 })
  })

  it('a completed child retried runs again, and the parent runs after it', async () => {
    await t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: [0, 1].map((idx) => ({ name: 'child-job', data: { idx }, queueName: t.queueName })),
    })
    const parentDone = first<Job>()
    t.worker(() => undefined, { queueName: parentName() }).on('completed', parentDone.listener)
    // The second child runs until the first, completed, is retried: the parent is still waiting then.
    const hold = gate()
    const worker = t.worker(
      async (job) => {
        await job.updateData({ idx: job.data.idx + 2 })
        if (job.data.idx === 3) await hold.passed
      },
      { concurrency: 2 },
    )
    const retried = first<unknown>()
    worker.on('completed', async (job) => {
      if (job.data.idx !== 2) return
      await job.retry('completed')
      hold.open()
      retried.listener(undefined)
    })
    await retried.value
    await parentDone.value
    expect(await t.queue.getJobCountByTypes('completed')).toBe(2)
    const ran = (await t.queue.getJobs(['completed'])).map((job) => job.data.idx).sort()
    expect(ran).toEqual([3, 4])
  })

  /** A parent (no worker) over a child with `option` whose first grandchild fails with failParentOnFailure. */
  const failingGrandchildTree = async (option: 'removeDependencyOnFailure' | 'ignoreDependencyOnFailure') => {
    const events = await t.events()
    const childFailed = first<{ jobId: string; failedReason: string; prev?: string }>()
    events.on('failed', childFailed.listener)
    const tree = await t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: [
        {
          name: 'child-job',
          data: { foo: 'qux' },
          queueName: t.queueName,
          opts: { [option]: true },
          children: [
            { name: 'child-job', data: { foo: 'bar' }, queueName: grandchildrenName(), opts: { failParentOnFailure: true } },
            { name: 'child-job', data: { foo: 'baz' }, queueName: grandchildrenName() },
          ],
        },
      ],
    })
    expect(await tree.job.getState()).toBe('waiting-children')
    t.worker((job) => (job.data.foo === 'bar' ? fail() : undefined), { queueName: grandchildrenName() })
    t.worker(() => undefined)
    const child = tree.children?.[0]
    const grandchild = child?.children?.[0]?.job as Job
    const reason = `child ${keyOf(grandchild)} failed`
    const event = await childFailed.value
    expect(event).toMatchObject({ jobId: child?.job.id, prev: 'active', failedReason: reason })
    const storedGrandchild = await t.queueOf(grandchildrenName()).getJob(grandchild.id as string)
    expect(await storedGrandchild?.getState()).toBe('failed')
    expect(storedGrandchild?.failedReason).toBe('failed')
    const storedChild = await t.queue.getJob(child?.job.id as string)
    expect(await storedChild?.getState()).toBe('failed')
    expect(storedChild?.failedReason).toBe(reason)
    const parentQueue = t.queueOf(parentName())
    await waitFor(async () => (await parentQueue.getJobState(tree.job.id as string)) === 'waiting', { what: 'the parent waiting' })
    return { tree, childKey: keyOf(child?.job as Job), reason, parentQueue }
  }

  it('failParentOnFailure under a removeDependencyOnFailure child: the child fails, its parent moves on', async () => {
    const { tree } = await failingGrandchildTree('removeDependencyOnFailure')
    expect(await tree.job.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 0, ignored: 0, failed: 0 })
  })

  it('failParentOnFailure under an ignoreDependencyOnFailure child: the child fails, its parent moves on', async () => {
    const { tree, childKey, reason, parentQueue } = await failingGrandchildTree('ignoreDependencyOnFailure')
    expect(Object.keys((await tree.job.getDependencies()).ignored ?? {})).toHaveLength(1)
    const parent = await parentQueue.getJob(tree.job.id as string)
    expect(await parent?.getIgnoredChildrenFailures()).toEqual({ [childKey]: reason })
  })

  it('removing a parent failed by its children removes them all', async () => {
    const tree = await t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: [
        { name: 'child-job', data: { idx: 0, foo: 'bar' }, queueName: t.queueName },
        {
          name: 'child-job',
          data: { idx: 0, foo: 'baz' },
          queueName: t.queueName,
          opts: { failParentOnFailure: true },
          children: [{ name: 'child-job', data: { idx: 0, foo: 'qux' }, queueName: t.queueName, opts: { failParentOnFailure: true } }],
        },
      ],
    })
    const children = tree.children ?? []
    expect(await tree.job.getState()).toBe('waiting-children')
    expect(await children[0]?.job.getState()).toBe('waiting')
    expect(await children[1]?.job.getState()).toBe('waiting-children')
    expect(await children[1]?.children?.[0]?.job.getState()).toBe('waiting')
    for (const child of children) {
      expect((await t.queue.getJob(child.job.id as string))?.parent).toMatchObject({
        id: tree.job.id,
        queueKey: tree.job.queueQualifiedName,
      })
    }
    const events = await t.events(parentName())
    const parentFailed = first<{ jobId: string }>()
    events.on('failed', (args) => args.jobId === tree.job.id && parentFailed.listener(args))
    t.worker(fail)
    t.worker(() => undefined, { queueName: parentName() })
    await parentFailed.value
    await tree.job.remove()
    expect(await t.queueOf(parentName()).getJob(tree.job.id as string)).toBeUndefined()
    for (const child of children) expect(await t.queue.getJob(child.job.id as string)).toBeUndefined()
    expect(await t.queue.getJobCountByTypes('failed')).toBe(0)
    expect(await children[0]?.job.getState()).toBe('unknown')
    expect(await children[1]?.job.getState()).toBe('unknown')
    expect(await tree.job.getState()).toBe('unknown')
  })
})
