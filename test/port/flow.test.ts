/**
 * BullMQ's tests of flows (tests/flow.test.ts; the waiting-children getters and moveToWaitingChildren of
 * tests/getters.test.ts and tests/worker.test.ts), ported. They run on the libraries in FLOW_LIBRARIES
 * (adapter.ts): BullMQ 6.7 now, EchoMQ once its flows land. Left out: what needs manual processing
 * (`worker.getNextJob`, `moveToCompleted` with a token: not in EchoMQ, docs/migrating-from-bullmq.md "Left
 * out") and BullMQ's private keys. A child's key is BullMQ's `<queueQualifiedName>:<id>` (`keyOf`), the
 * shape `parentKey`, getChildrenValues and a failed parent's reason use.
 */
import type { FlowJob, Job, JobNode, Queue } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, differs, FLOW_LIBRARIES, first, gate, usePort } from './adapter.js'

// A hash of more than 64 fields is stored as a table, so HSCAN's COUNT pages it (this server's default, 512,
// would keep BullMQ's 72 processed children in one listpack, returned whole: BullMQ's remark on getDependencies).
const redis = useRedis(['--hash-max-listpack-entries', '64'])

/** A job's key as BullMQ names it to its parent: `<prefix>:<queue>:<id>`. */
const keyOf = (job: Job) => `${job.queueQualifiedName}:${job.id}`

/** The node's children, which a flow with children always has. */
const kids = (node: JobNode | undefined): JobNode[] => node?.children ?? []
const kid = (node: JobNode | undefined, i: number): JobNode => kids(node)[i] as JobNode

describe.each(FLOW_LIBRARIES)('%s: flows', (name) => {
  const t = usePort(redis, name)
  const parentName = () => `${t.queueName}-parent`
  const poll = (what: string, check: () => Promise<boolean>) => waitFor(check, { what })
  const stateOf = (queue: Queue, id: string | undefined) => queue.getJobState(id as string)

  describe('FlowProducer.add', () => {
    it('runs the children before the parent, which reads their results', async () => {
      const values = [{ bar: 'something' }, { baz: 'something' }, { qux: 'something' }]
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: values.map((_, idx) => ({ name: 'child-job', data: { idx, foo: ['bar', 'baz', 'qux'][idx] }, queueName: t.queueName })),
      })
      expect(await tree.job.getState()).toBe('waiting-children')
      expect(kids(tree)).toHaveLength(3)
      expect(kids(tree).map((c) => c.job.data.foo)).toEqual(['bar', 'baz', 'qux'])
      for (const child of kids(tree)) {
        expect(child.job.id).toBeTruthy()
        expect(child.job.parent).toEqual({ id: tree.job.id, queueKey: tree.job.queueQualifiedName })
        expect(child.job.parentKey).toBe(keyOf(tree.job))
      }

      t.worker((job) => values[job.data.idx])
      const seen = first<[Awaited<ReturnType<Job['getDependencies']>>, Record<string, unknown>]>()
      t.worker(async (job) => seen.listener([await job.getDependencies({ processed: {} }), await job.getChildrenValues()]), {
        queueName: parentName(),
      })
      const [dependencies, childrenValues] = await seen.value
      expect(dependencies.nextProcessedCursor).toBe(0)
      expect(Object.keys(dependencies.processed ?? {})).toHaveLength(3)
      expect(childrenValues).toEqual(Object.fromEntries(kids(tree).map((c, i) => [keyOf(c.job), values[i]])))
    })

    it('takes parent opts on the root job (a grandparent)', async () => {
      const grandparentQueue = t.queueOf(`${t.queueName}-grandparent`)
      const grandparent = await grandparentQueue.add('grandparent', { foo: 'bar' })
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [
          { name: 'child-job', data: { idx: 0 }, queueName: t.queueName },
          { name: 'child-job', data: { idx: 1 }, queueName: t.queueName },
        ],
        opts: { parent: { id: grandparent.id as string, queue: grandparent.queueQualifiedName } },
      })
      expect(tree.job.parentKey).toBe(keyOf(grandparent))
      expect(await tree.job.getState()).toBe('waiting-children')
      expect(kids(tree)).toHaveLength(2)
      t.worker((job) => job.data.idx * 10)
      const values = first<Record<string, unknown>>()
      t.worker(async (job) => values.listener(await job.getChildrenValues()), { queueName: parentName() })
      expect(await values.value).toEqual({ [keyOf(kid(tree, 0).job)]: 0, [keyOf(kid(tree, 1).job)]: 10 })
      const { unprocessed } = await grandparent.getDependencies()
      expect(unprocessed).toEqual([keyOf(tree.job)])
    })

    it('a parent with an empty list of children runs at once', async () => {
      const flow = t.flow()
      const tree = await flow.add({ name: 'parent-job', queueName: parentName(), data: {}, children: [] })
      expect(tree).toHaveProperty('job')
      expect(tree).not.toHaveProperty('children')
      const ran = first<string>()
      t.worker((job) => ran.listener(job.id as string), { queueName: parentName() })
      expect(await ran.value).toBe(tree.job.id)
    })

    it('takes custom job ids for the parent and the children', async () => {
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        opts: { jobId: 'my-parent' },
        children: [0, 1, 2].map((idx) => ({
          name: 'child-job',
          data: { idx },
          queueName: t.queueName,
          opts: { jobId: `my-child-${idx}` },
        })),
      })
      expect(tree.job.id).toBe('my-parent')
      expect(kids(tree).map((c) => c.job.id)).toEqual(['my-child-0', 'my-child-1', 'my-child-2'])
      t.worker((job) => job.data.idx)
      const values = first<Record<string, unknown>>()
      t.worker(async (job) => values.listener(await job.getChildrenValues()), { queueName: parentName() })
      expect(await values.value).toEqual(Object.fromEntries(kids(tree).map((c, i) => [keyOf(c.job), i])))
    })

    it('runs a chain of jobs from the deepest up', async () => {
      const flow = t.flow()
      const depth = 4
      let node: Parameters<typeof flow.add>[0] = { name: 'job-0', data: { level: 0 }, queueName: t.queueName }
      for (let level = 1; level < depth; level++) node = { name: `job-${level}`, data: { level }, queueName: t.queueName, children: [node] }
      const tree = await flow.add(node)
      const order: number[] = []
      const done = counted<[Job]>(depth)
      t.worker((job) => {
        order.push(job.data.level)
        return job.data.level
      }).on('completed', done.listener)
      await done.done
      expect(order).toEqual([0, 1, 2, 3])
      expect(await tree.job.getState()).toBe('completed')
      expect(await tree.job.getChildrenValues()).toEqual({ [keyOf(kid(tree, 0).job)]: 2 })
    })

    it('a parent with a delay is delayed once its children completed, then runs', async () => {
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        opts: { delay: 1000 },
        children: [{ name: 'child-job', data: {}, queueName: t.queueName }],
      })
      const parentQueue = t.queueOf(parentName())
      expect(await tree.job.getState()).toBe('waiting-children')
      const childDone = first<Job>()
      t.worker(() => 'ok').on('completed', childDone.listener)
      await childDone.value
      await poll('the parent delayed', async () => (await stateOf(parentQueue, tree.job.id)) === 'delayed')
      const ran = first<Job>()
      t.worker(() => undefined, { queueName: parentName() }).on('completed', ran.listener)
      const parent = await ran.value
      expect(parent.id).toBe(tree.job.id)
      expect((parent.processedOn as number) - (parent.timestamp as number)).toBeGreaterThanOrEqual(1000)
    })

    it('children with a delay are delayed', async () => {
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [{ name: 'child-job', data: {}, queueName: t.queueName, opts: { delay: 60_000 } }],
      })
      expect(await kid(tree, 0).job.getState()).toBe('delayed')
      expect(await t.queue.getDelayedCount()).toBe(1)
      expect(await tree.job.getState()).toBe('waiting-children')
    })

    it('children run by their priority', async () => {
      const flow = t.flow()
      await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [3, 1, 2].map((priority) => ({ name: `p${priority}`, data: {}, queueName: t.queueName, opts: { priority } })),
      })
      const done = counted<[Job]>(3)
      t.worker(() => undefined).on('completed', done.listener)
      expect((await done.done).map(([job]) => job.name)).toEqual(['p1', 'p2', 'p3'])
    })

    it('a parent whose child failed does not run', async () => {
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [{ name: 'child-job', data: { foo: 'bar' }, queueName: t.queueName }],
      })
      const failed = first<Job | undefined>()
      t.worker(() => {
        throw new Error('failed job')
      }).on('failed', failed.listener)
      expect((await failed.value)?.id).toBe(kid(tree, 0).job.id)
      const parentQueue = t.queueOf(parentName())
      expect(await parentQueue.getWaitingCount()).toBe(0)
      expect(await tree.job.getState()).toBe('waiting-children')
      expect(await tree.job.getDependenciesCount()).toMatchObject({ processed: 0, unprocessed: 1 })
    })

    it("a parent in a paused queue waits for the queue's resume", async () => {
      const parentQueue = t.queueOf(parentName())
      await parentQueue.pause()
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [{ name: 'child-job', data: {}, queueName: t.queueName }],
      })
      t.worker(() => undefined)
      const ran = first<string>()
      t.worker((job) => ran.listener(job.id as string), { queueName: parentName() })
      await poll('the parent waiting', async () => (await parentQueue.getWaitingCount()) === 1)
      expect(await tree.job.getState()).toBe('waiting')
      await parentQueue.resume()
      expect(await ran.value).toBe(tree.job.id)
      expect(await parentQueue.getWaitingCount()).toBe(0)
    })

    it('refuses a child whose parent does not exist, and adds nothing', async () => {
      const flow = t.flow()
      const parentKey = `${t.queue.qualifiedName}:missing-parent`
      await expect(
        flow.add({
          name: 'orphan-child',
          queueName: t.queueName,
          data: { foo: 'bar' },
          opts: { parent: { id: 'missing-parent', queue: t.queue.qualifiedName }, jobId: 'orphan-child-id' },
        }),
      ).rejects.toThrow(parentKey)
      expect(await t.queue.getJob('orphan-child-id')).toBeUndefined()
    })
  })

  describe('FlowProducer.add, options', () => {
    it("takes each queue's defaultJobOptions (queuesOptions)", async () => {
      const tree = await t.flow().add(
        {
          name: 'parent-job',
          queueName: parentName(),
          data: {},
          children: [0, 1].map((idx) => ({ name: 'child-job', data: { idx }, queueName: t.queueName })),
        },
        { queuesOptions: { [t.queueName]: { defaultJobOptions: { removeOnComplete: true } } } },
      )
      t.worker((job) => job.data.idx)
      const values = first<Record<string, unknown>>()
      t.worker(async (job) => values.listener(await job.getChildrenValues()), { queueName: parentName() })
      expect(await values.value).toEqual({ [keyOf(kid(tree, 0).job)]: 0, [keyOf(kid(tree, 1).job)]: 1 })
      // The children took removeOnComplete from their queue's options: gone once completed.
      expect(await t.queue.getCompletedCount()).toBe(0)
    })

    it('a child retried after its backoff still lets the parent run', async () => {
      const tree = await t.flow().add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [{ name: 'child-job', data: {}, queueName: t.queueName, opts: { attempts: 3, backoff: 100 } }],
      })
      t.worker((job) => {
        if (job.attemptsMade < 2) throw new Error('Not yet!')
        return 'third time'
      })
      const values = first<Record<string, unknown>>()
      t.worker(async (job) => values.listener(await job.getChildrenValues()), { queueName: parentName() })
      expect(await values.value).toEqual({ [keyOf(kid(tree, 0).job)]: 'third time' })
      expect((await t.queue.getJob(kid(tree, 0).job.id as string))?.attemptsMade).toBe(3)
    })

    it("a FlowProducer's prefix is its jobs' prefix", async () => {
      const prefix = 'custom'
      const tree = await t.flow(prefix).add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [{ name: 'child-job', data: { foo: 'bar' }, queueName: t.queueName }],
      })
      // A queue's qualified name is the library's (EchoMQ's has the name in a hash tag): the producer's prefix's.
      expect(tree.job.queueQualifiedName).toBe(t.queueOf(parentName(), prefix).qualifiedName)
      expect(tree.job.queueQualifiedName.startsWith(`${prefix}:`)).toBe(true)
      expect(await tree.job.getState()).toBe('waiting-children')
      // Nothing under the default prefix.
      expect(await t.queue.getJobCountByTypes()).toBe(0)
      t.worker(() => 'done', { prefix })
      const values = first<Record<string, unknown>>()
      t.worker(async (job) => values.listener(await job.getChildrenValues()), { queueName: parentName(), prefix })
      expect(await values.value).toEqual({ [keyOf(kid(tree, 0).job)]: 'done' })
    })

    it('a parent with removeOnComplete is removed once it ran', async () => {
      const tree = await t.flow().add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        opts: { removeOnComplete: true },
        children: [0, 1, 2].map((idx) => ({ name: 'child-job', data: { idx }, queueName: t.queueName })),
      })
      t.worker((job) => job.data.idx)
      const done = first<Job>()
      t.worker(() => undefined, { queueName: parentName() }).on('completed', done.listener)
      const parent = await done.value
      const parentQueue = t.queueOf(parentName())
      await poll('the parent removed', async () => (await parentQueue.getJob(tree.job.id as string)) === undefined)
      // Its processed children's results went with it (BullMQ's removeJobKeys).
      expect((await parent.getDependencies()).processed ?? {}).toEqual({})
    })
  })

  describe('FlowProducer.addBulk', () => {
    it('adds flows, each root reading its own child', async () => {
      const flow = t.flow()
      const trees = await flow.addBulk(
        [0, 1].map((idx) => ({
          name: `root-job-${idx}`,
          queueName: parentName(),
          data: {},
          children: [{ name: 'child-job', data: { idx }, queueName: t.queueName }],
        })),
      )
      expect(trees.map((tree) => tree.job.name)).toEqual(['root-job-0', 'root-job-1'])
      t.worker((job) => ({ idx: job.data.idx }))
      const values = counted<[string, Record<string, unknown>]>(2)
      t.worker(async (job) => values.listener(job.name, await job.getChildrenValues()), { queueName: parentName() })
      const byName = Object.fromEntries(await values.done)
      for (const [idx, tree] of trees.entries()) expect(byName[tree.job.name]).toEqual({ [keyOf(kid(tree, 0).job)]: { idx } })
    })

    it('takes parent opts on a root job', async () => {
      const grandparentQueue = t.queueOf(`${t.queueName}-grandparent`)
      const grandparent = await grandparentQueue.add('grandparent', {})
      const flow = t.flow()
      const [tree] = await flow.addBulk([
        {
          name: 'parent-job',
          queueName: parentName(),
          data: {},
          children: [{ name: 'child-job', data: {}, queueName: t.queueName }],
          opts: { parent: { id: grandparent.id as string, queue: grandparent.queueQualifiedName } },
        },
      ])
      expect(tree?.job.parentKey).toBe(keyOf(grandparent))
      expect(await tree?.job.getState()).toBe('waiting-children')
    })
  })

  describe('getFlow', () => {
    const addTree = (flowAdd: ReturnType<typeof t.flow>) =>
      flowAdd.add({
        name: 'root-job',
        queueName: parentName(),
        data: {},
        children: [
          {
            name: 'child-job',
            data: { foo: 'bar' },
            queueName: t.queueName,
            children: [
              {
                name: 'child-job',
                data: { foo: 'baz' },
                queueName: t.queueName,
                children: [{ name: 'child-job', data: { foo: 'qux' }, queueName: t.queueName }],
              },
            ],
          },
          { name: 'child-job', data: { foo: 'bax' }, queueName: t.queueName },
          { name: 'child-job', data: { foo: 'bay' }, queueName: t.queueName },
        ],
      })

    it('reads a flow tree back', async () => {
      const flow = t.flow()
      const original = await addTree(flow)
      const tree = await flow.getFlow({ id: original.job.id as string, queueName: parentName() })
      expect(await tree.job.isWaitingChildren()).toBe(true)
      expect(kids(tree)).toHaveLength(3)
      const deep = kids(tree).find((c) => c.job.data.foo === 'bar')
      expect(deep?.job.queueName).toBe(t.queueName)
      expect(kids(deep)).toHaveLength(1)
      expect(kid(deep, 0).job.data.foo).toBe('baz')
      expect(kid(deep, 0).job.queueName).toBe(t.queueName)
      expect(kid(kid(deep, 0), 0).job.data.foo).toBe('qux')
    })

    it('reads part of a tree (depth, maxChildren)', async () => {
      const flow = t.flow()
      const original = await addTree(flow)
      const tree = await flow.getFlow({ id: original.job.id as string, queueName: parentName(), depth: 2, maxChildren: 2 })
      expect(await tree.job.isWaitingChildren()).toBe(true)
      expect(kids(tree).length).toBeGreaterThanOrEqual(2)
      for (const child of kids(tree).slice(0, 2)) {
        expect(child.job.id).toBeTruthy()
        expect(child.children).toBeUndefined()
      }
    })
  })

  describe('dependencies', () => {
    it('getDependencies pages through many processed children', async () => {
      // 72 children, as BullMQ's case: pages of 50 need a hash stored as a table (the file's server: see useRedis).
      const count = 72
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: Array.from({ length: count }, (_, idx) => ({ name: 'child-job', data: { idx }, queueName: t.queueName })),
      })
      expect(kids(tree)).toHaveLength(count)
      t.worker((job) => ({ idx: job.data.idx }), { concurrency: 20 })
      const pages = first<Record<string, unknown>[]>()
      t.worker(
        async (job) => {
          const read: Record<string, unknown>[] = []
          let cursor = 0
          do {
            const page = await job.getDependencies({ processed: { cursor, count: 50 } })
            read.push(page.processed ?? {})
            cursor = page.nextProcessedCursor ?? 0
          } while (cursor !== 0 && read.length < 100)
          pages.listener(read)
        },
        { queueName: parentName() },
      )
      const read = await pages.value
      expect(read.length).toBeGreaterThan(1)
      expect(Object.keys(read[0] ?? {}).length).toBeGreaterThanOrEqual(50)
      expect(Object.keys(read[1] ?? {}).length).toBeLessThanOrEqual(22)
      const all = Object.assign({}, ...read)
      expect(Object.keys(all)).toHaveLength(count)
      expect(all[keyOf(kid(tree, 7).job)]).toEqual({ idx: 7 })
    })

    it('getDependencies and getDependenciesCount split the children by state', async () => {
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [0, 1, 2].map((idx) => ({ name: 'child-job', data: { idx }, queueName: t.queueName })),
      })
      const pending = await tree.job.getDependencies()
      expect([...(pending.unprocessed ?? [])].sort()).toEqual(
        kids(tree)
          .map((c) => keyOf(c.job))
          .sort(),
      )
      expect(pending.processed).toEqual({})
      expect(await tree.job.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 3, ignored: 0, failed: 0 })
      const done = counted<[Job]>(1)
      const hold = gate()
      const worker = t.worker(async (job) => {
        if (job.data.idx !== 0) await hold.passed
        return job.data.idx
      })
      worker.on('completed', done.listener)
      await done.done
      const first0 = keyOf(kid(tree, 0).job)
      const half = await tree.job.getDependencies()
      expect(half.processed).toEqual({ [first0]: 0 })
      expect(half.unprocessed).not.toContain(first0)
      expect(await tree.job.getDependenciesCount({ processed: true, unprocessed: true })).toEqual({ processed: 1, unprocessed: 2 })
      hold.open()
    })

    it('a job added with opts.parent becomes one more child of that parent', async () => {
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [{ name: 'child-job', data: { n: 1 }, queueName: t.queueName }],
      })
      const extra = await t.queue.add('extra', { n: 2 }, { parent: { id: tree.job.id as string, queue: tree.job.queueQualifiedName } })
      expect(extra.parentKey).toBe(keyOf(tree.job))
      expect(await tree.job.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 2 })
      t.worker((job) => job.data.n)
      const values = first<Record<string, unknown>>()
      t.worker(async (job) => values.listener(await job.getChildrenValues()), { queueName: parentName() })
      expect(await values.value).toEqual({ [keyOf(kid(tree, 0).job)]: 1, [keyOf(extra)]: 2 })
    })

    it('jobs added by queue.addBulk with opts.parent become more children of that parent, beside a plain job', async () => {
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [{ name: 'child-job', data: { n: 1 }, queueName: t.queueName }],
      })
      const parent = { id: tree.job.id as string, queue: tree.job.queueQualifiedName }
      const added = await t.queue.addBulk([
        { name: 'extra', data: { n: 2 }, opts: { parent } },
        { name: 'plain', data: { n: 0 } },
        { name: 'extra', data: { n: 3 }, opts: { parent, jobId: 'bulk-child' } },
      ])
      expect(added.map((j) => j.parentKey)).toEqual([keyOf(tree.job), undefined, keyOf(tree.job)])
      expect(added[2]?.id).toBe('bulk-child')
      expect(await tree.job.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 3 })
      t.worker((job) => job.data.n)
      const values = first<Record<string, unknown>>()
      t.worker(async (job) => values.listener(await job.getChildrenValues()), { queueName: parentName() })
      const [two, , three] = added as [Job, Job, Job]
      expect(await values.value).toEqual({ [keyOf(kid(tree, 0).job)]: 1, [keyOf(two)]: 2, [keyOf(three)]: 3 })
    })

    it('children removed on completion still give the parent their results', async () => {
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent',
        data: {},
        queueName: t.queueName,
        children: ['child0', 'child1'].map((n) => ({ name: n, data: {}, queueName: t.queueName, opts: { removeOnComplete: true } })),
      })
      const processed = first<Record<string, unknown> | undefined>()
      const worker = t.worker((job) => job.name)
      worker.on('completed', async (job) => {
        if (job.name === 'parent') processed.listener((await job.getDependencies()).processed)
      })
      expect(await processed.value).toEqual({ [keyOf(kid(tree, 0).job)]: 'child0', [keyOf(kid(tree, 1).job)]: 'child1' })
    })
  })

  describe('waiting-children', () => {
    it('the getters, counts and event of a parent waiting for its children', async () => {
      const events = await t.events(parentName())
      const seen = first<{ jobId: string }>()
      events.on('waiting-children', seen.listener)
      const flow = t.flow()
      const tree = await flow.add({
        name: 'parent-job',
        queueName: parentName(),
        data: {},
        children: [{ name: 'child-job', data: {}, queueName: t.queueName }],
      })
      const parentQueue = t.queueOf(parentName())
      expect(await tree.job.isWaitingChildren()).toBe(true)
      expect(await parentQueue.getWaitingChildrenCount()).toBe(1)
      expect(await parentQueue.getJobCounts('waiting-children', 'waiting')).toEqual({ 'waiting-children': 1, waiting: 0 })
      expect((await parentQueue.getWaitingChildren()).map((job) => job.id)).toEqual([tree.job.id])
      expect((await parentQueue.getJobs(['waiting-children'])).map((job) => job.id)).toEqual([tree.job.id])
      expect(await parentQueue.getJobState(tree.job.id as string)).toBe('waiting-children')
      expect((await seen.value).jobId).toBe(tree.job.id)
    })
  })

  describe('a child added again', () => {
    it('refuses a child that already has another parent', async () => {
      await t.flow().add({
        queueName: t.queueName,
        name: 'tue',
        opts: { jobId: 'tue' },
        children: [{ name: 'mon', queueName: t.queueName, opts: { jobId: 'mon' } }],
      })
      await t.queue.add('wed', {}, { jobId: 'wed' })
      const wedKey = `${t.queue.qualifiedName}:wed`
      await differs.refused(
        name,
        t.queue.add('mon', {}, { jobId: 'mon', parent: { id: 'wed', queue: t.queue.qualifiedName } }),
        `The parent job ${wedKey} cannot be replaced. addJob`,
        differs.secondParentRefusal(name, 'mon', wedKey),
      )
      expect((await t.queue.getJob('mon'))?.parentKey).toBe(`${t.queue.qualifiedName}:tue`)
    })

    it('a parent added again over its completed child runs at once', async () => {
      const done = first<Job>()
      t.worker(() => undefined).on('completed', (job) => {
        if (job.id === 'tue') done.listener(job)
      })
      const flow = t.flow()
      const tue = (opts: { removeOnComplete?: boolean }) =>
        flow.add({
          queueName: t.queueName,
          name: 'tue',
          opts: { jobId: 'tue', ...opts },
          children: [{ name: 'mon', queueName: t.queueName, opts: { jobId: 'mon' } }],
        })
      await tue({ removeOnComplete: true })
      await done.value
      // 'mon' is still there, completed: the parent added again has nothing to wait for.
      const tree = await tue({})
      await poll('the parent added again completed', async () => (await tree.job.getState()) === 'completed')
    })
  })

  describe('deduplication on a flow node', () => {
    it.each([
      ['the root', true],
      ['a nested node', false],
    ])('is refused on %s with children', async (_, root) => {
      const dedup = { deduplication: { id: 'dedup-with-children' } }
      const withChildren = {
        name: 'node',
        queueName: t.queueName,
        data: {},
        opts: dedup,
        children: [{ name: 'child', queueName: t.queueName, data: { foo: 'bar' } }],
      }
      const flow = root ? withChildren : { name: 'root', queueName: t.queueName, data: {}, children: [withChildren] }
      await differs.refused(
        name,
        t.flow().add(flow as unknown as FlowJob),
        'Deduplication options cannot be used on flow nodes with children',
        {
          code: 'ERR_OPTIONS',
          mentions: 'deduplication',
        },
      )
      expect(await t.queue.getJobCountByTypes()).toBe(0)
    })

    it('a root without children is deduplicated: add, addBulk, concurrent adds', async () => {
      const flow = t.flow()
      const opts = (id: string) => ({ deduplication: { id }, delay: 60_000 })
      if (!differs.flowRootDeduplicates(name)) {
        // differs.flowRootDeduplicates: EchoMQ refuses deduplication on any flow node (docs/flows.md).
        await differs.refused(name, flow.add({ name: 'root', data: {}, queueName: t.queueName, opts: opts('one') }), '', {
          mentions: 'deduplication',
        })
        expect(await t.queue.getJobCountByTypes()).toBe(0)
        return
      }
      const first1 = await flow.add({ name: 'root', data: { order: 1 }, queueName: t.queueName, opts: opts('one') })
      const second1 = await flow.add({ name: 'root', data: { order: 2 }, queueName: t.queueName, opts: opts('one') })
      expect(second1.job.id).toBe(first1.job.id)
      expect(await t.queue.getDeduplicationJobId('one')).toBe(first1.job.id)
      const [a, b] = await flow.addBulk(
        [1, 2].map((idx) => ({ name: `root-${idx}`, data: { idx }, queueName: t.queueName, opts: opts('bulk') })),
      )
      expect(b?.job.id).toBe(a?.job.id)
      expect(await t.queue.getDeduplicationJobId('bulk')).toBe(a?.job.id)
      const trees = await Promise.all(
        Array.from({ length: 8 }, (_, index) =>
          flow.add({ name: `root-${index}`, data: { index }, queueName: t.queueName, opts: opts('concurrent') }),
        ),
      )
      expect(new Set(trees.map((tree) => tree.job.id)).size).toBe(1)
      expect(await t.queue.getJobCountByTypes('delayed')).toBe(3)
    })
  })
})
