/**
 * BullMQ's tests of a failing child in a flow (tests/flow.test.ts: failParentOnFailure,
 * ignoreDependencyOnFailure, removeDependencyOnFailure, continueParentOnFailure, a child's retry; the option
 * checks of tests/job.test.ts) and of moveToWaitingChildren with WaitingChildrenError (tests/flow.test.ts,
 * "step jobs"), ported. They run on FLOW_LIBRARIES (adapter.ts): BullMQ now, EchoMQ once its flows land.
 */
import type { FlowJob, Job, JobNode } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, differs, FLOW_LIBRARIES, first, gate, usePort } from './adapter.js'

const redis = useRedis()

const keyOf = (job: Job) => `${job.queueQualifiedName}:${job.id}`
const kid = (node: JobNode | undefined, i: number): JobNode => (node?.children ?? [])[i] as JobNode

describe.each(FLOW_LIBRARIES)('%s: a failing child', (name) => {
  const t = usePort(redis, name)
  const parentName = () => `${t.queueName}-parent`
  const fail = () => {
    throw new Error('error')
  }
  /** A flow of a parent (in parentName()) and `children` (in the test's queue). */
  const flowOf = (children: Omit<FlowJob, 'queueName'>[]) =>
    t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      children: children.map((child) => ({ ...child, queueName: t.queueName })),
    })

  describe('failParentOnFailure', () => {
    it('fails the parent, and the grandparent, with the failed child named', async () => {
      const grandchildrenName = `${t.queueName}-grandchildren`
      const events = await t.events(parentName())
      const parentFailed = first<{ jobId: string; failedReason: string; prev?: string }>()
      const tree = await t.flow().add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [
          { name: 'child-job', data: { foo: 'bar' }, queueName: t.queueName },
          {
            name: 'child-job',
            data: { foo: 'qux' },
            queueName: t.queueName,
            opts: { failParentOnFailure: true },
            children: [
              { name: 'child-job', data: { foo: 'bar' }, queueName: grandchildrenName, opts: { failParentOnFailure: true } },
              { name: 'child-job', data: { foo: 'baz' }, queueName: grandchildrenName },
            ],
          },
        ],
      })
      events.on('failed', (args) => {
        if (args.jobId === tree.job.id) parentFailed.listener(args)
      })
      expect(await tree.job.getState()).toBe('waiting-children')
      const middle = kid(tree, 1)
      const failing = kid(middle, 0)
      t.worker((job) => (job.id === failing.job.id ? fail() : undefined), { queueName: grandchildrenName })
      t.worker(() => undefined)
      t.worker(() => undefined, { queueName: parentName() })

      const failed = await parentFailed.value
      expect(failed.prev).toBe('active')
      expect(failed.failedReason).toBe(`child ${keyOf(middle.job)} failed`)
      expect(await tree.job.getDependenciesCount({ failed: true })).toEqual({ failed: 1 })
      expect(kid(await t.flow().getFlow({ id: tree.job.id as string, queueName: parentName() }), 1)).toBeDefined()

      const grandchild = await t.queueOf(grandchildrenName).getJob(failing.job.id as string)
      expect(await grandchild?.getState()).toBe('failed')
      expect(grandchild?.failedReason).toBe('error')
      const child = await t.queue.getJob(middle.job.id as string)
      expect(await child?.getState()).toBe('failed')
      expect(child?.failedReason).toBe(`child ${keyOf(failing.job)} failed`)
      const parent = await t.queueOf(parentName()).getJob(tree.job.id as string)
      expect(await parent?.getState()).toBe('failed')
      expect(parent?.failedReason).toBe(`child ${keyOf(middle.job)} failed`)
    })

    it('fails a parent that moved itself to delayed', async () => {
      const { DelayedError } = t.lib
      const childrenName = `${t.queueName}-children`
      const flow = t.flow()
      const events = await t.events()
      const parentFailed = first<{ jobId: string; failedReason: string; prev?: string }>()
      events.on('failed', parentFailed.listener)
      // The grandchild fails only once its grandparent is delayed.
      const delayed = gate()
      events.on('delayed', () => delayed.open())
      t.worker(
        async () => {
          await delayed.passed
          throw new Error('failed')
        },
        { queueName: `${t.queueName}-grandchildren` },
      )
      t.worker(() => undefined, { queueName: childrenName })
      const child = first<Job>()
      t.worker(async (job, token) => {
        if (job.data.step === 'initial') {
          const node = await flow.add({
            name: 'child-job',
            queueName: childrenName,
            data: {},
            children: [
              { name: 'grandchild-job', data: {}, queueName: `${t.queueName}-grandchildren`, opts: { failParentOnFailure: true } },
            ],
            opts: { failParentOnFailure: true, parent: { id: job.id as string, queue: job.queueQualifiedName } },
          })
          child.listener(node.job)
          await job.updateData({ step: 'delayed' })
          await job.moveToDelayed(Date.now() + 60_000, token)
          throw new DelayedError()
        }
        return 'finished'
      })
      const job = await t.queue.add('test', { step: 'initial' }, { attempts: 3, backoff: 1000 })
      const failed = await parentFailed.value
      expect(failed.jobId).toBe(job.id)
      expect(failed.prev).toBe('active')
      expect(failed.failedReason).toBe(`child ${keyOf(await child.value)} failed`)
    })

    it('with removeOnFail on the parent, removes it', async () => {
      const tree = await t.flow().add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        opts: { removeOnFail: true },
        children: [{ name: 'child-job', data: {}, queueName: t.queueName, opts: { failParentOnFailure: true } }],
      })
      const parentQueue = t.queueOf(parentName())
      t.worker(fail)
      t.worker(() => undefined, { queueName: parentName() })
      await waitFor(async () => (await parentQueue.getJob(tree.job.id as string)) === undefined, { what: 'the parent removed' })
      expect(await parentQueue.getJobCounts('failed', 'waiting-children', 'wait')).toEqual({ failed: 0, 'waiting-children': 0, wait: 0 })
    })
  })

  it('ignoreDependencyOnFailure: the parent runs, and reads its failed children as ignored', async () => {
    const tree = await flowOf([0, 1, 2].map((idx) => ({ name: 'child-job', data: { idx }, opts: { ignoreDependencyOnFailure: true } })))
    expect(await tree.job.getState()).toBe('waiting-children')
    t.worker(fail)
    const seen = first<Awaited<ReturnType<Job['getDependencies']>>>()
    const parentWorker = t.worker(async (job) => seen.listener(await job.getDependencies({ processed: {}, ignored: {} })), {
      queueName: parentName(),
    })
    const completed = first<Job>()
    parentWorker.on('completed', completed.listener)
    const dependencies = await seen.value
    expect(dependencies).toMatchObject({ processed: {}, nextProcessedCursor: 0, nextIgnoredCursor: 0 })
    expect(Object.keys(dependencies.ignored ?? {})).toHaveLength(3)
    expect((await completed.value).finishedOn).toBeTypeOf('number')
    expect(await t.queueOf(parentName()).getJobCounts('completed')).toEqual({ completed: 1 })
    expect(await tree.job.getDependenciesCount({ ignored: true })).toEqual({ ignored: 3 })
    const children = tree.children ?? []
    expect(await tree.job.getIgnoredChildrenFailures()).toEqual(Object.fromEntries(children.map((c) => [keyOf(c.job), 'error'])))
    expect((await t.flow().getFlow({ id: tree.job.id as string, queueName: parentName() })).children).toHaveLength(3)
  })

  it('removeDependencyOnFailure: the parent runs with no dependency left', async () => {
    const tree = await flowOf([0, 1, 2].map((idx) => ({ name: 'child-job', data: { idx }, opts: { removeDependencyOnFailure: true } })))
    expect(await tree.job.getState()).toBe('waiting-children')
    t.worker(fail)
    const seen = first<Awaited<ReturnType<Job['getDependencies']>>>()
    const completed = first<Job>()
    t.worker(async (job) => seen.listener(await job.getDependencies({ processed: {} })), { queueName: parentName() }).on(
      'completed',
      completed.listener,
    )
    expect(await seen.value).toEqual({ processed: {}, nextProcessedCursor: 0 })
    expect((await completed.value).finishedOn).toBeTypeOf('number')
    expect(await t.queueOf(parentName()).getJobCounts('completed')).toEqual({ completed: 1 })
  })

  describe('continueParentOnFailure', () => {
    it('the parent starts once the child fails, and reads its failure', async () => {
      const tree = await flowOf([{ name: 'child-job', data: {}, opts: { continueParentOnFailure: true } }])
      t.worker(() => {
        throw new Error('failed')
      })
      const seen = first<[Record<string, string>, unknown]>()
      t.worker(async (job) => seen.listener([await job.getFailedChildrenValues(), await job.getDependenciesCount()]), {
        queueName: parentName(),
      })
      const [failures, counts] = await seen.value
      expect(failures[keyOf(kid(tree, 0).job)]).toBe('failed')
      expect(counts).toEqual({ processed: 0, unprocessed: 0, ignored: 1, failed: 0 })
    })

    it('the parent starts even while other children wait', async () => {
      const tree = await flowOf(
        [0, 1, 2, 3, 4].map((idx) => ({ name: 'child-job', data: { idx }, opts: idx === 2 ? { continueParentOnFailure: true } : {} })),
      )
      const failing = kid(tree, 2).job
      const parentRan = first<[Record<string, string>, unknown]>()
      t.worker(async (job) => parentRan.listener([await job.getFailedChildrenValues(), await job.getDependenciesCount()]), {
        queueName: parentName(),
      })
      // The other children are held running until the parent ran: it started while they were unprocessed.
      const hold = gate()
      t.worker(
        async (job) => {
          if (job.id === failing.id) throw new Error('failed')
          await hold.passed
        },
        { concurrency: 5 },
      )
      const [failures, counts] = await parentRan.value
      hold.open()
      expect(failures[keyOf(failing)]).toBe('failed')
      expect(counts).toMatchObject({ unprocessed: 4 })
    })
  })

  describe('continueParentOnFailure, more', () => {
    it('a second child failing after the parent started is ignored', async () => {
      const tree = await flowOf(
        [0, 1, 2, 3, 4].map((idx) => ({
          name: 'child-job',
          data: { idx },
          opts: idx === 1 || idx === 2 ? { continueParentOnFailure: true } : {},
        })),
      )
      const failing = kid(tree, 1).job
      const parentRan = counted<[Record<string, string>]>(1)
      // The parent's run ends either way: it may finish before its other children (BullMQ then fails it with
      // pending dependencies) or after them.
      const parentDone = first<Job | undefined>()
      const parentWorker = t.worker(async (job) => parentRan.listener(await job.getFailedChildrenValues()), { queueName: parentName() })
      parentWorker.on('completed', parentDone.listener)
      parentWorker.on('failed', parentDone.listener)
      const childrenDone = counted<[Job | undefined]>(5)
      const worker = t.worker((job) => {
        if (job.data.idx === 1 || job.data.idx === 2) throw new Error('failed')
      })
      worker.on('completed', childrenDone.listener)
      worker.on('failed', childrenDone.listener)
      const [[failures]] = (await parentRan.done) as [[Record<string, string>]]
      await childrenDone.done
      await parentDone.value
      expect(failures[keyOf(failing)]).toBe('failed')
      // The parent ran once, whatever the second failure did.
      expect(parentRan.calls).toHaveLength(1)
      expect(await t.queueOf(parentName()).getJobCounts('wait', 'delayed', 'active')).toEqual({ wait: 0, delayed: 0, active: 0 })
    })

    it('a parent with a delay is delayed once the child fails', async () => {
      const tree = await t.flow().add({
        name: 'parent-job',
        queueName: parentName(),
        opts: { delay: 1000 },
        data: {},
        children: [{ name: 'child-job', data: {}, queueName: t.queueName, opts: { continueParentOnFailure: true } }],
      })
      const parentQueue = t.queueOf(parentName())
      const failed = first<Job | undefined>()
      t.worker(() => {
        throw new Error('failed')
      }).on('failed', failed.listener)
      await failed.value
      await waitFor(async () => (await parentQueue.getJobState(tree.job.id as string)) === 'delayed', { what: 'the parent delayed' })
      expect(await parentQueue.getWaitingCount()).toBe(0)
      const ran = first<Record<string, string>>()
      t.worker(async (job) => ran.listener(await job.getFailedChildrenValues()), { queueName: parentName() })
      expect((await ran.value)[keyOf(kid(tree, 0).job)]).toBe('failed')
    })

    it('a parent with a priority is prioritized once the child fails', async () => {
      const tree = await t.flow().add({
        name: 'parent-job',
        queueName: parentName(),
        opts: { priority: 5 },
        data: {},
        children: [{ name: 'child-job', data: {}, queueName: t.queueName, opts: { continueParentOnFailure: true } }],
      })
      const parentQueue = t.queueOf(parentName())
      t.worker(() => {
        throw new Error('failed')
      })
      await waitFor(async () => (await parentQueue.getJobState(tree.job.id as string)) === 'prioritized', {
        what: 'the parent prioritized',
      })
      expect(await parentQueue.getPrioritizedCount()).toBe(1)
    })
  })

  it('a child failed with ignoreDependencyOnFailure, retried, is a dependency again', async () => {
    const tree = await flowOf([{ name: 'child-job', data: { foo: 'bar' }, opts: { ignoreDependencyOnFailure: true, attempts: 1 } }])
    const failed = first<Job | undefined>()
    const worker = t.worker(fail)
    worker.on('failed', failed.listener)
    await failed.value
    await worker.close()
    await waitFor(async () => (await tree.job.getDependenciesCount({ ignored: true })).ignored === 1, { what: 'the failure ignored' })
    const child = await t.queue.getJob(kid(tree, 0).job.id as string)
    await child?.retry('failed')
    expect(await child?.getState()).toBe('waiting')
    expect(await tree.job.getDependenciesCount({ ignored: true, unprocessed: true })).toEqual({ ignored: 0, unprocessed: 1 })
  })

  it('failParentOnFailure fails a parent that waits prioritized', async () => {
    const tree = await t.flow().add({
      name: 'parent-job',
      queueName: parentName(),
      data: {},
      opts: { priority: 5 },
      children: [{ name: 'child-job', data: {}, queueName: t.queueName, opts: { failParentOnFailure: true } }],
    })
    const parentQueue = t.queueOf(parentName())
    t.worker(fail)
    t.worker(() => undefined, { queueName: parentName() })
    await waitFor(async () => (await parentQueue.getJobState(tree.job.id as string)) === 'failed', { what: 'the parent failed' })
    expect((await parentQueue.getJob(tree.job.id as string))?.failedReason).toBe(`child ${keyOf(kid(tree, 0).job)} failed`)
  })

  it('a failed child retried and then completed lets its parent run', async () => {
    const tree = await flowOf([{ name: 'child-job', data: { idx: 0 } }])
    const parentDone = first<Job>()
    t.worker(() => undefined, { queueName: parentName() }).on('completed', parentDone.listener)
    const worker = t.worker(async (job) => {
      if (job.data.idx === 0) {
        await job.updateData({ idx: 1 })
        throw new Error('error')
      }
    })
    worker.on('failed', (job) => void job?.retry('failed'))
    expect((await parentDone.value).id).toBe(tree.job.id)
    expect(await t.queue.getJobCountByTypes('completed')).toBe(1)
  })

  it('a failed child removed on failure (removeOnFail) lets its parent run', async () => {
    await t.flow().add({
      name: 'parent',
      data: {},
      queueName: t.queueName,
      children: [
        { name: 'child0', data: {}, queueName: t.queueName, opts: { removeOnFail: true } },
        { name: 'child1', data: {}, queueName: t.queueName },
      ],
    })
    const counts = first<unknown>()
    const worker = t.worker((job) => (job.name === 'child0' ? fail() : undefined))
    worker.on('completed', async (job) => {
      if (job.name === 'parent') counts.listener(await job.getDependenciesCount())
    })
    expect(await counts.value).toMatchObject({ processed: 1 })
  })

  it.each([
    ['removeDependencyOnFailure', 'failParentOnFailure'],
    ['removeDependencyOnFailure', 'ignoreDependencyOnFailure'],
    ['failParentOnFailure', 'ignoreDependencyOnFailure'],
  ])('refuses %s with %s on one job', async (a, b) => {
    const refused = await t.queue.add('test', { foo: 'bar' }, { [a]: true, [b]: true }).then(
      () => undefined,
      (e: Error) => e,
    )
    expect(refused?.message).toContain(a)
    expect(refused?.message).toContain(b)
    expect(await t.queue.getJobCountByTypes()).toBe(0)
  })
})

describe.each(FLOW_LIBRARIES)('%s: moveToWaitingChildren', (name) => {
  const t = usePort(redis, name)
  const childrenName = () => `${t.queueName}-children`

  it('a job waits for the children it added as a step, then finishes (WaitingChildrenError)', async () => {
    const { WaitingChildrenError } = t.lib
    const flow = t.flow()
    t.worker(() => undefined, { queueName: childrenName() })
    t.worker(() => undefined, { queueName: `${t.queueName}-grandchildren` })
    const waited: boolean[] = []
    const worker = t.worker(async (job, token) => {
      if (job.data.step === 'initial') {
        await flow.add({
          name: 'child-job',
          queueName: childrenName(),
          data: {},
          children: [0, 1].map((idx) => ({ name: 'grandchild-job', data: { idx }, queueName: `${t.queueName}-grandchildren` })),
          opts: { parent: { id: job.id as string, queue: job.queueQualifiedName } },
        })
        await job.updateData({ step: 'wait' })
      }
      const shouldWait = await job.moveToWaitingChildren(token as string)
      waited.push(shouldWait)
      if (shouldWait) throw new WaitingChildrenError()
      await job.updateData({ step: 'finish' })
      return 'finish'
    })
    const done = first<Job>()
    const failed = counted<[Job | undefined, Error]>(1)
    worker.on('completed', done.listener)
    worker.on('failed', failed.listener)
    await t.queue.add('test', { step: 'initial' }, { attempts: 3, backoff: 1000 })
    const job = await done.value
    expect(job.returnvalue).toBe('finish')
    expect(job.data).toEqual({ step: 'finish' })
    expect(waited).toEqual([true, false])
    expect(failed.calls).toEqual([])
    expect(t.errors).toEqual([])
  })

  it('returns false for a job with no pending child, which stays active and completes', async () => {
    const results = first<[boolean, string]>()
    t.worker(async (job, token) => {
      const moved = await job.moveToWaitingChildren(token as string)
      results.listener([moved, await job.getState()])
      return 'done'
    })
    const job = await t.queue.add('test', {})
    expect(await results.value).toEqual([false, 'active'])
    await waitFor(async () => (await job.getState()) === 'completed', { what: 'the job completed' })
  })

  it('a job that finishes with children pending fails with a pending-dependencies reason', async () => {
    const flow = t.flow()
    const events = await t.events()
    const ended = first<{ event: string; jobId: string; failedReason?: string; prev?: string }>()
    t.worker(async (job) => {
      await flow.add({
        name: 'child-job',
        queueName: childrenName(),
        data: {},
        opts: { parent: { id: job.id as string, queue: job.queueQualifiedName } },
      })
      return 'finished too early'
    })
    const job = await t.queue.add('test', {})
    events.on('failed', (args) => args.jobId === job.id && ended.listener({ event: 'failed', ...args }))
    events.on('completed', (args) => args.jobId === job.id && ended.listener({ event: 'completed', ...args }))
    const event = await ended.value
    if (!differs.pendingChildrenFailParent(name)) {
      // differs.pendingChildrenFailParent: EchoMQ completes it (docs/flows.md, "Differences from BullMQ 6.7").
      expect(event.event).toBe('completed')
      expect(await job.getState()).toBe('completed')
      return
    }
    expect(event.event).toBe('failed')
    expect(event.prev).toBe('active')
    expect(event.failedReason).toContain('pending dependencies')
    expect(event.failedReason).toContain(job.id as string)
    expect(await job.getState()).toBe('failed')
  })
})
