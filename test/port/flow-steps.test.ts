/**
 * BullMQ's tests of a running job that adds children as a step and then ends (tests/flow.test.ts, "when
 * chaining flows at runtime using step jobs": a failParentOnFailure child still pending, a child that failed
 * before the parent waits for it, one level down too, and a parent that fails on its own), ported: the cases
 * flow-failures.test.ts does not cover. They run on FLOW_LIBRARIES (adapter.ts). BullMQ's processors wait a
 * second for the child's failure to reach the parent; here the parent polls its own failed count.
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { differs, FLOW_LIBRARIES, first, usePort } from './adapter.js'

const redis = useRedis()

type Failed = { jobId: string; failedReason: string; prev?: string }

describe.each(FLOW_LIBRARIES)('%s: step jobs whose children fail', (name) => {
  const t = usePort(redis, name)
  const childrenName = () => `${t.queueName}-children`
  const grandchildrenName = () => `${t.queueName}-grandchildren`
  /**
   * The reason of a job failed by moveToWaitingChildren over a failed child: BullMQ's message; EchoMQ's
   * names the job (its refusals' messages differ on purpose, adapter.ts `differs.refused`).
   */
  const expectFailedChild = (reason: string | undefined, id: string) =>
    name === 'bullmq'
      ? expect(reason).toBe(`Cannot complete job ${id} because it has at least one failed child. moveToWaitingChildren`)
      : expect(reason).toContain(`job ${id} `)
  const fail = () => {
    throw new Error('fail')
  }
  /**
   * The QueueEvents `failed` events from now on: call before the job is added (EchoMQ writes the events stream
   * only while a QueueEvents listens, docs/migrating-from-bullmq.md), then wait for one job's.
   */
  const failedEvents = async () => {
    const events = await t.events()
    const seen: Failed[] = []
    events.on('failed', (args) => seen.push(args))
    return (id: string | undefined) => waitFor(() => seen.find((f) => f.jobId === id), { what: `the failed event of job ${id}` })
  }
  /** A grandchild of `parent` that fails, under a child with failParentOnFailure (BullMQ's tree). */
  const addFailingTree = (flow: ReturnType<typeof t.flow>, parent: Job) =>
    flow.add({
      name: 'child-job',
      queueName: childrenName(),
      data: {},
      children: [
        { name: 'grandchild-job', data: { idx: 0, foo: 'bar' }, queueName: grandchildrenName(), opts: { failParentOnFailure: true } },
      ],
      opts: { parent: { id: parent.id as string, queue: parent.queueQualifiedName }, failParentOnFailure: true },
    })
  /** Moves the running job to wait for its children once one of them failed (BullMQ: after a second). */
  const waitAfterFailure = async (job: Job, token: string | undefined) => {
    await waitFor(async () => (await job.getDependenciesCount({ failed: true })).failed === 1, { what: 'a failed child' })
    if (await job.moveToWaitingChildren(token as string)) throw new t.lib.WaitingChildrenError()
    return 'finish'
  }

  it('a job that ends with a failParentOnFailure child pending fails with pending dependencies', async () => {
    const flow = t.flow()
    const ended = first<string>()
    const worker = t.worker(async (job) => {
      await flow.add({
        name: 'child-job',
        queueName: childrenName(),
        data: {},
        opts: { parent: { id: job.id as string, queue: job.queueQualifiedName }, failParentOnFailure: true },
      })
      await job.updateData({ step: 'finish' })
    })
    worker.on('completed', (job) => ended.listener(`completed ${job.id}`))
    const failedOf = await failedEvents()
    const job = await t.queue.add('test', { step: 'initial' })
    if (!differs.pendingChildrenFailParent(name)) {
      // differs.pendingChildrenFailParent: EchoMQ completes it (docs/flows.md, "Differences from BullMQ 6.7").
      expect(await ended.value).toBe(`completed ${job.id}`)
      return
    }
    const event = await failedOf(job.id)
    expect(event.prev).toBe('active')
    expect(event.failedReason).toBe(`Job ${job.id} has pending dependencies. moveToFinished`)
  })

  it('a job whose failParentOnFailure child failed while it ran fails as it moves to wait for it', async () => {
    const flow = t.flow()
    t.worker(fail, { queueName: grandchildrenName() })
    t.worker(() => undefined, { queueName: childrenName() })
    const workerFailed = first<Job | undefined>()
    const worker = t.worker(async (job, token) => {
      if (job.data.step === 'initial') {
        await addFailingTree(flow, job)
        await job.updateData({ step: 'third' })
      }
      return waitAfterFailure(job, token)
    })
    worker.on('failed', workerFailed.listener)
    const failedOf = await failedEvents()
    const job = await t.queue.add('test', { step: 'initial' }, { attempts: 3, backoff: 1000 })
    expectFailedChild((await workerFailed.value)?.failedReason, job.id as string)
    const event = await failedOf(job.id)
    expect(event.prev).toBe('active')
    expectFailedChild(event.failedReason, job.id as string)
    expect(await t.queue.getActiveCount()).toBe(0)
    expect(await job.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 0, ignored: 0, failed: 1 })
  })

  it('the same one level down: the child and then its parent fail as they move to wait', async () => {
    const flow = t.flow()
    const asChild = (job: Job) => ({ parent: { id: job.id as string, queue: job.queueQualifiedName }, failParentOnFailure: true })
    t.worker(fail, { queueName: grandchildrenName() })
    t.worker(
      async (job, token) => {
        if (job.data.step === undefined) {
          await flow.add({ name: 'grandchild-job', data: { idx: 0, foo: 'bar' }, queueName: grandchildrenName(), opts: asChild(job) })
          await job.updateData({ step: 'second' })
        }
        return waitAfterFailure(job, token)
      },
      { queueName: childrenName() },
    )
    const workerFailed = first<Job | undefined>()
    const worker = t.worker(async (job, token) => {
      if (job.data.step === 'initial') {
        await flow.add({ name: 'child-job', queueName: childrenName(), data: {}, opts: asChild(job) })
        await job.updateData({ step: 'second' })
      }
      return waitAfterFailure(job, token)
    })
    worker.on('failed', workerFailed.listener)
    const failedOf = await failedEvents()
    const job = await t.queue.add('test', { step: 'initial' }, { attempts: 3, backoff: 1000 })
    expectFailedChild((await workerFailed.value)?.failedReason, job.id as string)
    const event = await failedOf(job.id)
    expect(event.prev).toBe('active')
    expectFailedChild(event.failedReason, job.id as string)
    expect(await job.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 0, ignored: 0, failed: 1 })
  })

  it('a job that fails on its own before it waits for its children fails with its own error', async () => {
    const flow = t.flow()
    t.worker(fail, { queueName: grandchildrenName() })
    t.worker(async (job) => {
      await addFailingTree(flow, job)
      await job.updateData({ step: 'third' })
      throw new Error('fail')
    })
    const failedOf = await failedEvents()
    const job = await t.queue.add('test', { step: 'initial' })
    const event = await failedOf(job.id)
    expect(event.prev).toBe('active')
    expect(event.failedReason).toBe('fail')
  })
})
