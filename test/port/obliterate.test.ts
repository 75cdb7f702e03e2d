/**
 * BullMQ's tests/obliterate.test.ts and tests/obliterate.redis.test.ts, ported, run on BullMQ 6.7 and on EchoMQ.
 * The redis-only cases assert "no keys remain" with KEYS on BullMQ's key layout; here they assert the same
 * through the public API (counts, getJob, getJobSchedulers, getJobLogs). Where BullMQ's case obliterates while
 * a job runs for 250 ms, the job here waits at a gate until the case has tried.
 */
import type { Job, QueueEvents } from 'bullmq'
import { beforeEach, describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { gate, LIBRARIES, runFor, usePort } from './adapter.js'

const redis = useRedis()

const ALL = ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting', 'waiting-children'] as const

describe.each(LIBRARIES)('%s: obliterate', (name) => {
  const t = usePort(redis, name)
  let queueEvents: QueueEvents

  beforeEach(async () => {
    queueEvents = await t.events()
  })

  const emptied = async (ids: string[] = []) => {
    expect(await t.queue.getJobCountByTypes(...ALL)).toBe(0)
    expect(await t.queue.count()).toBe(0)
    for (const id of ids) expect(await t.queue.getJob(id)).toBeUndefined()
  }

  it('should raise exception if queue has active jobs', async () => {
    await t.queue.waitUntilReady()
    await t.queue.add('test', { foo: 'bar' })
    const job = await t.queue.add('test', { qux: 'baz' })
    await t.queue.add('test', { foo: 'bar2' })
    await t.queue.add('test', { foo: 'bar3' }, { delay: 5000 })

    const held = gate()
    let first = true
    const worker = t.worker(
      async (running: Job) => {
        if (first) {
          first = false
          throw new Error('failed first')
        }
        if (running.id !== job.id) await held.passed
      },
      { lockDuration: 30000 },
    )
    await worker.waitUntilReady()
    await job.waitUntilFinished(queueEvents)
    await waitFor(async () => (await t.queue.getActiveCount()) === 1, { what: 'the third job running' })
    await expect(t.queue.obliterate()).rejects.toThrow('Cannot obliterate queue with active jobs')
    held.open()
  })

  it('should remove job logs', async () => {
    const worker = t.worker(
      async (job: Job) => {
        return job.log('Lorem Ipsum Dolor Sit Amet')
      },
      { lockDuration: 30000 },
    )
    await worker.waitUntilReady()
    const job = await t.queue.add('test', {})
    await job.waitUntilFinished(queueEvents)
    await t.queue.obliterate({ force: true })
    const { logs } = await t.queue.getJobLogs(job.id as string)
    expect(logs).toHaveLength(0)
  })

  describe('redis-only cases, asserted through the API', () => {
    it('should obliterate an empty queue', async () => {
      await t.queue.waitUntilReady()
      await t.queue.obliterate()
      await emptied()
    })

    it('should obliterate a queue which is empty but has had jobs in the past', async () => {
      const job = await t.queue.add('test', { foo: 'bar' })
      await job.remove()
      await t.queue.obliterate()
      await emptied([job.id as string])
    })

    it('should obliterate a queue with jobs in different statuses', async () => {
      const a = await t.queue.add('test', { foo: 'bar' })
      const b = await t.queue.add('test', { foo: 'bar2' })
      const c = await t.queue.add('test', { foo: 'bar3' }, { delay: 5000 })
      const job = await t.queue.add('test', { qux: 'baz' })
      let first = true
      const worker = t.worker(
        async () => {
          if (first) {
            first = false
            throw new Error('failed first')
          }
          return runFor(250)
        },
        { lockDuration: 30000 },
      )
      await worker.waitUntilReady()
      await job.waitUntilFinished(queueEvents)
      await t.queue.obliterate()
      await emptied([a, b, c, job].map((j) => j.id as string))
    })

    it('should obliterate if queue has active jobs using "force"', async () => {
      await t.queue.add('test', { foo: 'bar' })
      const job = await t.queue.add('test', { qux: 'baz' })
      await t.queue.add('test', { foo: 'bar2' })
      await t.queue.add('test', { foo: 'bar3' }, { delay: 5000 })
      let first = true
      const worker = t.worker(
        async () => {
          if (first) {
            first = false
            throw new Error('failed first')
          }
          return runFor(250)
        },
        { lockDuration: 30000 },
      )
      await worker.waitUntilReady()
      await job.waitUntilFinished(queueEvents)
      await t.queue.obliterate({ force: true })
      await emptied([job.id as string])
    })

    it('should remove job schedulers', async () => {
      await t.queue.upsertJobScheduler('test-scheduler', { every: 1000 })
      expect(await t.queue.getJobSchedulers()).toHaveLength(1)
      await t.queue.obliterate()
      expect(await t.queue.getJobSchedulers()).toHaveLength(0)
      expect(await t.queue.getJobSchedulersCount()).toBe(0)
      await emptied()
    })

    it('should obliterate a queue with high number of jobs in different statuses', { timeout: 30000 }, async () => {
      const arr1: Promise<Job>[] = []
      for (let i = 0; i < 300; i++) arr1.push(t.queue.add('test', { foo: `barLoop${i}` }))
      const [lastCompletedJob] = (await Promise.all(arr1)).splice(-1)
      let fail = false
      const worker = t.worker(
        async () => {
          if (fail) throw new Error('failed job')
        },
        { lockDuration: 30000 },
      )
      await worker.waitUntilReady()
      await lastCompletedJob?.waitUntilFinished(queueEvents)
      fail = true
      const arr2: Promise<Job>[] = []
      for (let i = 0; i < 300; i++) arr2.push(t.queue.add('test', { foo: `barLoop${i}` }))
      const [lastFailedJob] = (await Promise.all(arr2)).splice(-1)
      await expect(lastFailedJob?.waitUntilFinished(queueEvents)).rejects.toThrow('failed job')
      await worker.close()
      const arr3: Promise<Job>[] = []
      for (let i = 0; i < 1623; i++) arr3.push(t.queue.add('test', { foo: `barLoop${i}` }, { delay: 10000 }))
      await Promise.all(arr3)
      await t.queue.obliterate()
      await emptied([lastCompletedJob?.id as string, lastFailedJob?.id as string])
    })

    describe('when creating a flow', () => {
      it('parent in same queue with >1 pending children: removes parent record', async () => {
        const flow = t.flow()
        const cname = 'child-job'
        await flow.add({
          name: 'parent-job',
          queueName: t.queueName,
          data: {},
          children: [
            { name: cname, data: { idx: 0, foo: 'bar' }, queueName: t.queueName },
            { name: cname, data: { idx: 1, foo: 'baz' }, queueName: t.queueName },
            { name: cname, data: { idx: 2, foo: 'qux' }, queueName: t.queueName },
          ],
        })
        expect(await t.queue.count()).toEqual(4)
        await t.queue.obliterate()
        expect(await t.queue.count()).toEqual(0)
        expect(await t.queue.getJobCountByTypes('failed')).toEqual(0)
        await emptied()
      })

      it('parent in same queue with pending children in a different queue: keeps parent in waiting-children', async () => {
        const childrenQueueName = `children-${t.queueName}`
        t.queueOf(childrenQueueName)
        const flow = t.flow()
        await flow.add({
          name: 'parent-job',
          queueName: t.queueName,
          data: {},
          children: [{ name: 'child-job', data: { idx: 0, foo: 'bar' }, queueName: childrenQueueName }],
        })
        expect(await t.queue.count()).toEqual(1)
        await t.queue.obliterate()
        // BullMQ's test: 3 keys remain (the parent's hash, its dependencies, waiting-children); count() 1.
        // EchoMQ's obliterate removes the parent too (docs/flows.md, "Differences from BullMQ 6.7").
        expect(await t.queue.count()).toEqual(name === 'echomq' ? 0 : 1)
      })

      it('parent in a different queue with >1 pending children: deletes children, parent moves to wait', async () => {
        const parentQueueName = `parent-${t.queueName}`
        const parentQueue = t.queueOf(parentQueueName)
        const flow = t.flow()
        const cname = 'child-job'
        await flow.add({
          name: 'parent-job',
          queueName: parentQueueName,
          data: {},
          children: [
            { name: cname, data: { idx: 0, foo: 'bar' }, queueName: t.queueName },
            { name: cname, data: { idx: 1, foo: 'baz' }, queueName: t.queueName },
            { name: cname, data: { idx: 2, foo: 'qux' }, queueName: t.queueName },
          ],
        })
        expect(await t.queue.count()).toEqual(3)
        await t.queue.obliterate()
        expect(await t.queue.count()).toEqual(0)
        expect(await t.queue.getJobCountByTypes('failed')).toEqual(0)
        expect(await parentQueue.getJobCountByTypes('wait')).toEqual(1)
      })

      it('parent in a different queue with 1 pending child: moves parent to wait', async () => {
        const parentQueueName = `parent-${t.queueName}`
        const parentQueue = t.queueOf(parentQueueName)
        const flow = t.flow()
        await flow.add({
          name: 'parent-job',
          queueName: parentQueueName,
          data: {},
          children: [{ name: 'child-job', data: { idx: 0, foo: 'bar' }, queueName: t.queueName }],
        })
        expect(await t.queue.count()).toEqual(1)
        await t.queue.obliterate()
        expect(await t.queue.count()).toEqual(0)
        expect(await t.queue.getJobCountByTypes('failed')).toEqual(0)
        expect(await parentQueue.getJobCountByTypes('wait')).toEqual(1)
      })
    })
  })
})
