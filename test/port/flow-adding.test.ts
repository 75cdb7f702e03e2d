/**
 * BullMQ's tests of flows added over existing jobs (tests/flow.test.ts: "when continually adding jobs", and
 * addBulk with one root refused), ported: the cases flow.test.ts does not cover. They run on FLOW_LIBRARIES
 * (adapter.ts). BullMQ's "child active while its parent is added" holds the child with a processor's delay;
 * here a gate holds it running.
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { differs, FLOW_LIBRARIES, first, gate, usePort } from './adapter.js'

const redis = useRedis()

describe.each(FLOW_LIBRARIES)('%s: adding flows over existing jobs', (name) => {
  const t = usePort(redis, name)
  /** A parent `id` with one child `childId`, in the test's queue (BullMQ's day names). */
  const dayOver = (flow: ReturnType<typeof t.flow>, id: string, childId: string) =>
    flow.add({
      queueName: t.queueName,
      name: id,
      opts: { jobId: id },
      children: [{ name: childId, queueName: t.queueName, opts: { jobId: childId } }],
    })
  /** Resolves with the job `id` once the worker completed it. */
  const completedOf = (worker: ReturnType<typeof t.worker>, id: string) => {
    const done = first<Job>()
    worker.on('completed', (job) => {
      if (job.id === id) done.listener(job)
    })
    return done.value
  }

  it('a flow whose child is an existing parent waits for it (tue over mon, wed over tue)', async () => {
    const flow = t.flow()
    await dayOver(flow, 'tue', 'mon')
    const wed = await dayOver(flow, 'wed', 'tue')
    expect(await wed.job.getState()).toBe('waiting-children')
    expect((await t.queue.getJob('tue'))?.parentKey).toBe(`${t.queue.qualifiedName}:wed`)
    const worker = t.worker(() => undefined)
    await completedOf(worker, 'wed')
    expect(await t.queue.getJobCountByTypes('completed')).toBe(3)
  })

  it('a flow whose child is a completed job runs at once (thu over wed)', async () => {
    const flow = t.flow()
    await dayOver(flow, 'tue', 'mon')
    await dayOver(flow, 'wed', 'tue')
    const worker = t.worker(() => undefined)
    await completedOf(worker, 'wed')
    const thu = completedOf(worker, 'thu')
    const tree = await dayOver(flow, 'thu', 'wed')
    await thu
    expect(await tree.job.getState()).toBe('completed')
  })

  it('a parent added while its child runs runs once the child completes', async () => {
    const hold = gate()
    const running = first<string>()
    const worker = t.worker(async (job) => {
      if (job.id === 'mon') {
        running.listener(job.id)
        await hold.passed
      }
    })
    const flow = t.flow()
    await flow.add({ queueName: t.queueName, name: 'mon', opts: { jobId: 'mon' }, children: [] })
    await running.value
    const tue = completedOf(worker, 'tue')
    const tree = await dayOver(flow, 'tue', 'mon')
    hold.open()
    await tue
    expect(await tree.job.getState()).toBe('completed')
  })

  it('addBulk with one root refused (a missing parent) adds the others, each id read back right', async () => {
    const flow = t.flow()
    // differs.flowRootDeduplicates: EchoMQ refuses deduplication on a flow node (docs/flows.md).
    const dedup = differs.flowRootDeduplicates(name) ? { deduplication: { id: 'dedup-valid-on-partial-failure' } } : {}
    const [valid, invalid] = await flow.addBulk([
      { name: 'valid-root', data: {}, queueName: t.queueName, opts: { ...dedup, delay: 1000 } },
      {
        name: 'invalid-root',
        data: {},
        queueName: t.queueName,
        opts: { parent: { id: 'missing-parent', queue: t.queue.qualifiedName } },
      },
    ])
    expect(await t.queue.getJob(valid?.job.id as string)).toBeDefined()
    expect(await t.queue.getJob(invalid?.job.id as string)).toBeUndefined()
    expect(await t.queue.getJobCountByTypes()).toBe(1)
  })
})
