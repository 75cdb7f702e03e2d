/**
 * Flows on a real three-master Redis Cluster, every script under the key guard: a parent and its children
 * in queues whose hash tags live on different masters (so no script can reach both), the hand-off through
 * the child queue's outbox, children added by queue.addBulk to parents on other masters, a failure policy
 * across slots, a sweep delivering an entry a crash left, and a removal across slots; a child's outcome at its
 * parent by its own event, a retried child pending again, a child removed as it fails, and a flow added again
 * over its ended child, across slots. No command may fail with CROSSSLOT, nor touch a key it was not given.
 */
import type { Cluster } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { FlowProducer, type Job, Queue, sweep, UnrecoverableError, Worker } from '../../lib/index.js'
import { finishRuns, setScriptWrapper, take } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { startCluster, type TestCluster } from '../helpers/cluster.js'
import { useClosing } from '../helpers/fixture.js'
import { keyGuard } from '../helpers/key-guard.js'
import { waitFor } from '../helpers/wait.js'

let cluster: TestCluster
let client: Cluster
/** Three queue names whose slots are owned by three different masters. */
let names: [string, string, string]
const errors: string[] = []

beforeAll(async () => {
  cluster = await startCluster(3)
  client = cluster.connect()
  names = (await cluster.queuesOnEachMaster('fq')) as [string, string, string]
  setScriptWrapper(keyGuard)
}, 60_000)
afterAll(async () => {
  setScriptWrapper(undefined)
  await cluster?.stop()
})
afterEach(() => {
  expect(errors).toEqual([])
})
// Registered after the check above, so it runs before it: errors raised while closing are counted.
const keep = useClosing()
// direct: a Queue on the cluster client
const queueOn = (name: string) => keep(new Queue(name, { connection: client }))
const worker = (name: string, fn: (job: Job) => unknown) => {
  // direct: workers on the cluster's URL, under the key guard
  const w = keep(new Worker(name, fn, { connection: cluster.url, lockDuration: 1_000 }))
  w.on('error', (err: Error) => errors.push(err.message))
  return w
}

describe('flows across slots', () => {
  it('three masters: the parent runs once after children on two other masters, with their values', async () => {
    const [p, a, b] = names
    const producer = keep(new FlowProducer({ connection: client }))
    const flow = await producer.add({
      name: 'parent',
      queueName: p,
      children: [
        { name: 'x', queueName: a, data: { v: 1 } },
        { name: 'y', queueName: b, data: { v: 2 }, children: [{ name: 'z', queueName: p, data: { v: 3 } }] },
      ],
    })
    const runs: unknown[] = []
    worker(a, (job) => (job.data as { v: number }).v)
    worker(b, async (job) => Object.values(await job.getChildrenValues()))
    worker(p, async (job) => {
      if (job.name === 'z') return 3
      runs.push(await job.getChildrenValues())
      return 'done'
    })
    const parents = queueOn(p)
    await waitFor(async () => (await parents.getJobState(flow.job.id)) === 'completed', { what: 'the parent completed' })
    expect(runs).toEqual([{ [`emq:{${a}}:${flow.children?.[0]?.job.id}`]: 1, [`emq:{${b}}:${flow.children?.[1]?.job.id}`]: [3] }])
  })

  it('queue.addBulk adds children to parents on two other masters beside a plain job; each parent runs with their values', async () => {
    const [p, a, b] = names
    const producer = keep(new FlowProducer({ connection: client }))
    const first = await producer.add({ name: 'first', queueName: p, children: [{ name: 'x', queueName: a, opts: { jobId: 'X' } }] })
    const second = await producer.add({ name: 'second', queueName: b, children: [{ name: 'y', queueName: a, opts: { jobId: 'Y' } }] })
    const kids = queueOn(a)
    const jobs = await kids.addBulk([
      { name: 'u', data: {}, opts: { jobId: 'U', parent: { id: first.job.id, queue: `emq:{${p}}` } } },
      { name: 'plain', data: {} },
      { name: 'v', data: {}, opts: { jobId: 'V', parent: { id: second.job.id, queue: `emq:{${b}}` } } },
    ])
    expect(jobs.map((j) => j.parentKey)).toEqual([`emq:{${p}}:${first.job.id}`, undefined, `emq:{${b}}:${second.job.id}`])
    const values = new Map<string, unknown>()
    worker(a, (job) => job.name)
    for (const q of [p, b])
      worker(q, async (job) => {
        values.set(job.name, await job.getChildrenValues())
      })
    await waitFor(() => values.size === 2, { what: 'both parents ran' })
    expect(values.get('first')).toEqual({ [`emq:{${a}}:X`]: 'x', [`emq:{${a}}:U`]: 'u' })
    expect(values.get('second')).toEqual({ [`emq:{${a}}:Y`]: 'y', [`emq:{${a}}:V`]: 'v' })
  })

  it('failParentOnFailure across slots fails the parent; a removal across slots removes the children', async () => {
    const [p, a] = names
    const producer = keep(new FlowProducer({ connection: client }))
    const flow = await producer.add({
      name: 'parent',
      queueName: p,
      children: [{ name: 'bad', queueName: a, opts: { failParentOnFailure: true } }],
    })
    worker(a, () => {
      throw new UnrecoverableError('no')
    })
    worker(p, () => 'ran')
    const parents = queueOn(p)
    await waitFor(async () => (await parents.getJobState(flow.job.id)) === 'failed', { what: 'the parent failed' })
    expect((await parents.getJob(flow.job.id))?.failedReason).toBe(`child emq:{${a}}:${flow.children?.[0]?.job.id} failed`)

    const second = await producer.add({
      name: 'parent',
      queueName: p,
      opts: { delay: 60_000 },
      children: [{ name: 'c', queueName: names[2] }],
    })
    await parents.remove(second.job.id)
    const kids = queueOn(names[2])
    expect(await kids.getJobState(second.children?.[0]?.job.id as string)).toBe('unknown')
  })

  it('an entry a crash left in the outbox is delivered by a sweep of the child queue', async () => {
    const [p, a] = names
    const producer = keep(new FlowProducer({ connection: client }))
    const flow = await producer.add({ name: 'parent', queueName: p, children: [{ name: 'c', queueName: a }] })
    const childId = flow.children?.[0]?.job.id as string
    const ka = queueKeys('emq', a)
    // A worker that ends the child and dies before telling the parent: the finish alone, no delivery.
    const taken = await take(client, ka, { workerToken: 'dead', leaseMs: 5_000, workerName: 'dead' }, [childId])
    expect(taken.taken.map((t) => t.job.id)).toEqual([childId])
    const reply = await finishRuns(client, ka, [
      { run: { id: childId, token: taken.taken[0]?.token as string }, action: 'complete', value: '"v"' },
    ])
    expect(reply.runs[0]?.handoff).toBeDefined()
    const parents = queueOn(p)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    await sweep(cluster.url, a)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting')
    expect(await client.hlen(ka.handoffs)).toBe(0)
  })
})

describe("a child's outcome across slots, as BullMQ 6.7 has it", () => {
  it("is at its parent by the child's own completed and failed events", async () => {
    const [p, a] = names
    const producer = keep(new FlowProducer({ connection: client }))
    const flow = await producer.add({
      name: 'parent',
      queueName: p,
      children: [
        { name: 'good', queueName: a },
        { name: 'bad', queueName: a, opts: { ignoreDependencyOnFailure: true } },
      ],
    })
    const parent = (await queueOn(p).getJob(flow.job.id)) as Job
    const seen: unknown[] = []
    const w = worker(a, (job) => {
      if (job.name === 'bad') throw new UnrecoverableError('no')
      return 'ok'
    })
    w.on('completed', async (job) => seen.push(['completed', job.name, await parent.getDependenciesCount()]))
    w.on('failed', async (job) => seen.push(['failed', job?.name, await parent.getDependenciesCount()]))
    await waitFor(async () => seen.length === 2, { what: 'both events' })
    // Each event's handler saw its own child's outcome at the parent.
    expect(seen).toEqual(
      expect.arrayContaining([
        ['completed', 'good', expect.objectContaining({ processed: 1 })],
        ['failed', 'bad', expect.objectContaining({ ignored: 1 })],
      ]),
    )
  })

  it('a failed child retried is a pending dependency again; one removed as it fails leaves the dependencies', async () => {
    const [p, a] = names
    const producer = keep(new FlowProducer({ connection: client }))
    const flow = await producer.add({
      name: 'parent',
      queueName: p,
      children: [
        { name: 'ignored', queueName: a, opts: { ignoreDependencyOnFailure: true } },
        { name: 'gone', queueName: a, opts: { removeOnFail: true } },
        { name: 'held', queueName: a, opts: { delay: 60_000 } },
      ],
    })
    const w = worker(a, () => {
      throw new UnrecoverableError('no')
    })
    const parents = queueOn(p)
    const parent = (await parents.getJob(flow.job.id)) as Job
    await waitFor(async () => (await parent.getDependenciesCount({ unprocessed: true })).unprocessed === 1, { what: 'two failures told' })
    await w.close()
    expect(await parent.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 1, ignored: 1, failed: 0 })
    const kids = queueOn(a)
    await kids.retryJobs({ ids: [flow.children?.[0]?.job.id as string] })
    expect(await parent.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 2, ignored: 0, failed: 0 })
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
  })

  it('a flow added again over its completed child in another slot: the parent runs at once', async () => {
    const [p, a] = names
    const producer = keep(new FlowProducer({ connection: client }))
    const add = (removeOnComplete: boolean) =>
      producer.add({
        name: 'parent',
        queueName: p,
        opts: { jobId: 'again', removeOnComplete },
        children: [{ name: 'c', queueName: a, opts: { jobId: 'again-child' } }],
      })
    worker(a, () => 'ok')
    worker(p, () => 'ran')
    const parents = queueOn(p)
    await add(true)
    await waitFor(async () => (await parents.getJobState('again')) === 'unknown', { what: 'the first parent ran and went' })
    await add(false)
    await waitFor(async () => (await parents.getJobState('again')) === 'completed', { what: 'the parent added again completed' })
    expect(await client.hlen(queueKeys('emq', a).handoffs)).toBe(0)
  })
})
