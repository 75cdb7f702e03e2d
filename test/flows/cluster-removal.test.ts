/**
 * Loosening and removing flows on a real three-master Redis Cluster, every script under the key guard: a
 * parent and its children in queues whose hash tags live on different masters. removeChildDependency (its
 * hand-off, a crash before the hand-off repaired by a sweep, an outcome not yet told), removeUnprocessedChildren,
 * and a removal refused while a grandchild on a third master runs. No command may fail with CROSSSLOT, nor
 * touch a key it was not given.
 */
import type { Cluster } from 'ioredis'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { FlowProducer, type Job, Queue, sweep, Worker } from '../../lib/index.js'
import { detachChild, finishRuns, setScriptWrapper, take } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { startCluster, type TestCluster } from '../helpers/cluster.js'
import { useClosing } from '../helpers/fixture.js'
import { keyGuard } from '../helpers/key-guard.js'
import { waitFor } from '../helpers/wait.js'

let cluster: TestCluster
let client: Cluster
/** Three queue names whose slots are owned by three different masters, fresh for each test. */
let names: [string, string, string]
let round = 0
const errors: string[] = []

beforeAll(async () => {
  cluster = await startCluster(3)
  client = cluster.connect()
  setScriptWrapper(keyGuard)
}, 60_000)
beforeEach(async () => {
  names = (await cluster.queuesOnEachMaster(`fr${++round}x`)) as [string, string, string]
})
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
const producer = () => keep(new FlowProducer({ connection: client }))
/** A worker whose every run waits until `released` settles: the job stays active meanwhile. */
const holdingWorker = (name: string, released: Promise<unknown>) => {
  const started: string[] = []
  const run = async (job: Job) => {
    started.push(job.id)
    await released
  }
  // direct: a worker on the cluster's URL, under the key guard
  const w = keep(new Worker(name, run, { connection: cluster.url, lockDuration: 1_000 }))
  w.on('error', (err: Error) => errors.push(err.message))
  return started
}
/** A gate a held run waits at: opened by the test, or after 10 s so no run waits for ever. */
const gate = () => {
  let open: () => void = () => undefined
  const passed = new Promise<void>((resolve) => {
    open = resolve
  })
  const timer = setTimeout(() => open(), 10_000)
  return {
    passed,
    open: () => {
      clearTimeout(timer)
      open()
    },
  }
}

describe('removeChildDependency across slots', () => {
  it('detaches children on two other masters; the last one moves the parent on', async () => {
    const [p, a, b] = names
    const flow = await producer().add({
      name: 'parent',
      queueName: p,
      children: [
        { name: 'x', queueName: a },
        { name: 'y', queueName: b },
      ],
    })
    const [x, y] = (flow.children ?? []).map((c) => c.job)
    const parents = queueOn(p)
    expect(await x?.removeChildDependency()).toBe(true)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    expect(await flow.job.getDependencies()).toMatchObject({ unprocessed: [`emq:{${b}}:${y?.id}`] })
    expect(await y?.removeChildDependency()).toBe(true)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting')
    expect((await queueOn(a).getJob(x?.id as string))?.parentKey).toBeUndefined()
    // A second call finds no parent: false, nothing changed.
    expect(await y?.removeChildDependency()).toBe(false)
    expect(await client.hlen(queueKeys('emq', a).handoffs)).toBe(0)
  })

  it('a crash between the child side and the hand-off: a sweep of the child queue moves the parent on', async () => {
    const [p, a] = names
    const flow = await producer().add({ name: 'parent', queueName: p, children: [{ name: 'c', queueName: a }] })
    const childId = flow.children?.[0]?.job.id as string
    const ka = queueKeys('emq', a)
    // The child's half alone, as a process that died before delivering.
    const reply = await detachChild(client, ka, childId, `emq:{${p}}:${flow.job.id}`)
    expect(reply.status).toBe('detached')
    const parents = queueOn(p)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    await sweep(cluster.url, a)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting')
    expect(await client.hlen(ka.handoffs)).toBe(0)
  })

  it('a completed child whose outcome was not told yet: told first, then false (no longer a dependency)', async () => {
    const [p, a] = names
    const flow = await producer().add({ name: 'parent', queueName: p, children: [{ name: 'c', queueName: a }] })
    const child = flow.children?.[0]?.job as Job
    const ka = queueKeys('emq', a)
    const taken = await take(client, ka, { workerToken: 'dead', leaseMs: 5_000, workerName: 'dead' }, [child.id])
    await finishRuns(client, ka, [{ run: { id: child.id, token: taken.taken[0]?.token as string }, action: 'complete', value: '"v"' }])
    expect(await client.hlen(ka.handoffs)).toBe(1)
    expect(await child.removeChildDependency()).toBe(false)
    expect(child.parentKey).toBe(`emq:{${p}}:${flow.job.id}`)
    expect(await flow.job.getChildrenValues()).toEqual({ [`emq:{${a}}:${child.id}`]: 'v' })
    expect(await queueOn(p).getJobState(flow.job.id)).toBe('waiting')
  })
})

describe('removeUnprocessedChildren across slots', () => {
  it('removes pending children and their own on three masters, keeps the running one; its end moves the parent on', async () => {
    const [p, a, b] = names
    const flow = await producer().add({
      name: 'parent',
      queueName: p,
      children: [
        { name: 'runs', queueName: a },
        { name: 'later', queueName: a, opts: { delay: 60_000 } },
        { name: 'waits', queueName: b },
        { name: 'nested', queueName: b, children: [{ name: 'grandchild', queueName: p }] },
      ],
    })
    const [runs, later, waits, nested] = (flow.children ?? []).map((c) => c.job)
    const grandchild = flow.children?.[3]?.children?.[0]?.job
    const hold = gate()
    const started = holdingWorker(a, hold.passed)
    await waitFor(() => started.length === 1, { what: 'the child started' })
    expect(started).toEqual([runs?.id])

    await flow.job.removeUnprocessedChildren()
    const [qa, qb, qp] = [queueOn(a), queueOn(b), queueOn(p)]
    expect(await qa.getJobState(later?.id as string)).toBe('unknown')
    expect(await qb.getJobState(waits?.id as string)).toBe('unknown')
    expect(await qb.getJobState(nested?.id as string)).toBe('unknown')
    expect(await qp.getJobState(grandchild?.id as string)).toBe('unknown')
    expect(await client.exists(queueKeys('emq', b).dependencies(nested?.id as string))).toBe(0)
    expect(await qa.getJobState(runs?.id as string)).toBe('active')
    expect(await flow.job.getDependencies()).toMatchObject({ unprocessed: [`emq:{${a}}:${runs?.id}`] })
    expect(await qp.getJobState(flow.job.id)).toBe('waiting-children')

    hold.open()
    await waitFor(async () => (await qp.getJobState(flow.job.id)) === 'waiting', { what: 'the parent moved on' })
  })

  it('with every pending child removed, the parent moves on at once', async () => {
    const [p, a, b] = names
    const flow = await producer().add({
      name: 'parent',
      queueName: p,
      children: [
        { name: 'x', queueName: a },
        { name: 'y', queueName: b },
      ],
    })
    await flow.job.removeUnprocessedChildren()
    expect(await queueOn(p).getJobState(flow.job.id)).toBe('waiting')
    expect(await queueOn(a).getJobCounts('waiting')).toEqual({ waiting: 0 })
    expect(await queueOn(b).getJobCounts('waiting')).toEqual({ waiting: 0 })
  })
})

describe('removing a tree across slots', () => {
  it('refuses while a grandchild on a third master runs, and removes nothing', async () => {
    const [p, a, b] = names
    const flow = await producer().add({
      name: 'parent',
      queueName: p,
      children: [{ name: 'child', queueName: a, children: [{ name: 'grandchild', queueName: b }] }],
    })
    const child = flow.children?.[0]?.job as Job
    const grandchild = flow.children?.[0]?.children?.[0]?.job as Job
    const hold = gate()
    const started = holdingWorker(b, hold.passed)
    await waitFor(() => started.length === 1, { what: 'the grandchild started' })
    const parents = queueOn(p)
    await expect(parents.removeJob(flow.job.id)).rejects.toMatchObject({ code: 'ERR_JOB_ACTIVE' })
    expect(await parents.remove(flow.job.id)).toBe(0)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    expect(await queueOn(a).getJobState(child.id)).toBe('waiting-children')
    expect(await queueOn(b).getJobState(grandchild.id)).toBe('active')
    // Without its children, the parent alone goes.
    expect(await parents.remove(flow.job.id, { removeChildren: false })).toBe(1)
    expect(await parents.getJobState(flow.job.id)).toBe('unknown')
    hold.open()
  })
})
