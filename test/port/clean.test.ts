/**
 * BullMQ's tests of queue.clean for the waiting states (tests/clean.test.ts: 'wait' and 'waiting',
 * 'prioritized', 'delayed', and clean in flows), ported, run on LIBRARIES (adapter.ts); with what BullMQ 6.7
 * does for 'paused' (its jobs wait in `wait`: none to clean) and 'active'. BullMQ's `await delay(100)` before
 * each clean with a grace of 0 is left out: a job is never younger than the clean that follows its add; a case
 * about the grace period waits for the gap in time it is about (`until`).
 */
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { LIBRARIES, type LibName, until, usePort } from './adapter.js'

const redis = useRedis()

/**
 * clean(grace, limit, 'active'): BullMQ removes active jobs whose lock is gone (none here: it resolves to []);
 * EchoMQ refuses the type with ERR_OPTIONS, an active job's lapsed lease being the sweep's to recover
 * (docs/migrating-from-bullmq.md, the `clean` row).
 */
const cleansActive = (lib: LibName): boolean => lib === 'bullmq'

describe.each(LIBRARIES)('%s: clean of the waiting states', (name) => {
  const t = usePort(redis, name)
  const addTwo = async (opts = {}) => {
    await t.queue.add('test', { some: 'data' }, opts)
    await t.queue.add('test', { some: 'data' }, opts)
  }

  it('should succeed when the limit is higher than the actual number of jobs', async () => {
    await addTwo()
    const deletedJobs = await t.queue.clean(0, 100, 'wait')
    expect(deletedJobs).toHaveLength(2)
    expect(await t.queue.count()).toBe(0)
  })

  it('should not clean anything if all jobs are in grace period', async () => {
    await addTwo()
    expect(await t.queue.count()).toBe(2)
    expect(await t.queue.clean(5000, 2, 'wait')).toHaveLength(0)
    expect(await t.queue.clean(5000, 2, 'wait')).toHaveLength(0)
    expect(await t.queue.count()).toBe(2)
  })

  it('should clean all waiting jobs', async () => {
    await addTwo()
    expect(await t.queue.clean(0, 0, 'wait')).toHaveLength(2)
    expect(await t.queue.count()).toBe(0)
  })

  it('should clean all delayed jobs when limit is given', async () => {
    await addTwo({ delay: 5000 })
    expect(await t.queue.clean(0, 1000, 'delayed')).toHaveLength(2)
    expect(await t.queue.count()).toBe(0)
  })

  it('should clean all prioritized jobs when limit is given', async () => {
    await t.queue.add('test', { some: 'data' }, { priority: 5000 })
    await t.queue.add('test', { some: 'data' }, { priority: 5001 })
    expect(await t.queue.clean(0, 1000, 'prioritized')).toHaveLength(2)
    expect(await t.queue.count()).toBe(0)
  })

  it('prioritized: should clean the number of jobs requested', async () => {
    await t.queue.add('test', { some: 'data' }, { priority: 1 })
    await t.queue.add('test', { some: 'data' }, { priority: 2 })
    await t.queue.add('test', { some: 'data' }, { priority: 3 })
    expect(await t.queue.clean(0, 1, 'prioritized')).toHaveLength(1)
    expect((await t.queue.getJobCounts('prioritized')).prioritized).toBe(2)
  })

  it('delayed: cleans all delayed jobs', async () => {
    await addTwo({ delay: 5000 })
    expect(await t.queue.clean(0, 0, 'delayed')).toHaveLength(2)
    expect(await t.queue.count()).toBe(0)
  })

  it('delayed: does not clean anything if all jobs are in grace period', async () => {
    await addTwo({ delay: 5000 })
    expect(await t.queue.clean(5000, 2, 'delayed')).toHaveLength(0)
    expect(await t.queue.count()).toBe(2)
  })

  it('each waiting type cleans its own jobs only, and resolves to their ids', async () => {
    const plain = await t.queue.add('test', { some: 'data' })
    const prioritized = await t.queue.add('test', { some: 'data' }, { priority: 1 })
    const delayed = await t.queue.add('test', { some: 'data' }, { delay: 5000 })
    expect(await t.queue.clean(0, 0, 'wait')).toEqual([plain.id])
    expect(await t.queue.getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({ waiting: 0, prioritized: 1, delayed: 1 })
    expect(await t.queue.clean(0, 0, 'delayed')).toEqual([delayed.id])
    expect(await t.queue.clean(0, 0, 'prioritized')).toEqual([prioritized.id])
    expect(await t.queue.getJob(plain.id as string)).toBeUndefined()
  })

  it('wait: only the jobs added before the grace period', async () => {
    const since = performance.now()
    const old = await t.queue.add('test', { some: 'data' })
    await until(since, 300)
    const young = await t.queue.add('test', { some: 'data' })
    expect(await t.queue.clean(150, 0, 'wait')).toEqual([old.id])
    expect((await t.queue.getWaiting()).map((j) => j.id)).toEqual([young.id])
  })

  it('should accept both "wait" and "waiting" in clean method', async () => {
    await t.queue.add('test', { some: 'data' })
    await addTwo()
    const counts = await t.queue.getJobCounts()
    expect(counts).toHaveProperty('waiting')
    expect(counts.waiting).toBe(3)
    expect(await t.queue.clean(0, 2, 'wait')).toHaveLength(2)
    expect(await t.queue.count()).toBe(1)
    await addTwo()
    expect(await t.queue.clean(0, 10, 'waiting')).toHaveLength(3)
    expect(await t.queue.count()).toBe(0)
  })

  it('should emit correct events for both "wait" and "waiting" clean operations', async () => {
    await addTwo()
    const seen: [string[], string][] = []
    t.queue.on('cleaned', (jobs, type) => seen.push([jobs, type]))
    await t.queue.clean(0, 1, 'wait')
    await t.queue.clean(0, 1, 'waiting')
    expect(seen.map(([jobs, type]) => [jobs.length, type])).toEqual([
      [1, 'wait'],
      [1, 'wait'],
    ])
  })

  it("paused: a paused queue's jobs wait in `wait`, so 'paused' cleans none; 'wait' cleans them", async () => {
    await t.queue.pause()
    await addTwo()
    const seen: [string[], string][] = []
    t.queue.on('cleaned', (jobs, type) => seen.push([jobs, type]))
    expect(await t.queue.clean(0, 0, 'paused')).toEqual([])
    expect(await t.queue.getJobCounts('waiting')).toEqual({ waiting: 2 })
    expect(await t.queue.clean(0, 0, 'wait')).toHaveLength(2)
    expect(seen.map(([jobs, type]) => [jobs.length, type])).toEqual([
      [0, 'paused'],
      [2, 'wait'],
    ])
    expect(await t.queue.isPaused()).toBe(true)
  })

  it('active: BullMQ cleans the active jobs whose lock is gone; EchoMQ refuses the type', async () => {
    await addTwo()
    const call = t.queue.clean(0, 0, 'active')
    if (cleansActive(name)) expect(await call).toEqual([])
    else await expect(call).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    expect(await t.queue.count()).toBe(2)
  })

  describe('when creating a flow', () => {
    it('parent in the same queue, more than 1 pending child: clean wait leaves nothing', async () => {
      const child = { name: 'child-job', queueName: t.queueName }
      await t.flow().add({
        name: 'parent-job',
        queueName: t.queueName,
        data: {},
        children: [
          { ...child, data: { idx: 0, foo: 'bar' } },
          { ...child, data: { idx: 1, foo: 'baz' } },
          { ...child, data: { idx: 2, foo: 'qux' } },
        ],
      })
      expect(await t.queue.count()).toBe(4)
      await t.queue.clean(0, 0, 'wait')
      expect(await t.queue.count()).toBe(0)
      expect(await t.queue.getJobCountByTypes('failed')).toBe(0)
    })

    it('parent with a pending child in a different queue: keeps the parent in waiting-children', async () => {
      const childrenQueueName = `${t.queueName}-children`
      t.queueOf(childrenQueueName)
      await t.flow().add({
        name: 'parent-job',
        queueName: t.queueName,
        data: {},
        children: [{ name: 'child-job', data: { idx: 0, foo: 'bar' }, queueName: childrenQueueName }],
      })
      expect(await t.queue.count()).toBe(1)
      await t.queue.clean(0, 0, 'wait')
      expect(await t.queue.count()).toBe(1)
    })

    it('parent in a different queue, more than 1 pending child: deletes each child, then the parent waits', async () => {
      const parentQueueName = `${t.queueName}-parent`
      const parentQueue = t.queueOf(parentQueueName)
      const child = { name: 'child-job', queueName: t.queueName }
      await t.flow().add({
        name: 'parent-job',
        queueName: parentQueueName,
        data: {},
        children: [
          { ...child, data: { idx: 0, foo: 'bar' } },
          { ...child, data: { idx: 1, foo: 'baz' } },
          { ...child, data: { idx: 2, foo: 'qux' } },
        ],
      })
      expect(await t.queue.count()).toBe(3)
      await t.queue.clean(0, 0, 'wait')
      expect(await t.queue.count()).toBe(0)
      expect(await t.queue.getJobCountByTypes('failed')).toBe(0)
      expect(await parentQueue.getJobCountByTypes('wait')).toBe(1)
    })

    it('parent in a different queue, its only child prioritized: clean prioritized moves the parent to wait', async () => {
      const parentQueueName = `${t.queueName}-parent`
      const parentQueue = t.queueOf(parentQueueName)
      await t.flow().add({
        name: 'parent-job',
        queueName: parentQueueName,
        data: {},
        children: [{ name: 'child-job', data: { idx: 0, foo: 'bar' }, opts: { priority: 1 }, queueName: t.queueName }],
      })
      expect(await t.queue.count()).toBe(1)
      expect((await t.queue.getJobCounts('prioritized')).prioritized).toBe(1)
      await t.queue.clean(0, 0, 'prioritized')
      expect(await t.queue.count()).toBe(0)
      expect(await t.queue.getJobCountByTypes('failed')).toBe(0)
      expect(await parentQueue.getJobCountByTypes('wait')).toBe(1)
    })
  })
})
