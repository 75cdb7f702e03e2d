/**
 * A job's side of flows, BullMQ 6.7's: a child added to an existing parent (opts.parent), a parent that
 * parks itself with moveToWaitingChildren (fenced by its run's token), removal (a parent with its children;
 * a child releasing its parent), a released parent's priority and delay, the waiting-children event, and
 * hostile input refused with nothing written.
 */
import { describe, expect, it } from 'vitest'
import { EchoMQError, type Job, QueueEvents, sweep, WaitingChildrenError } from '../../lib/index.js'
import { monitorDuring } from '../helpers/commands-on-key.js'
import { useFlows } from '../helpers/flows.js'
import { useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useFlows(redis)

/**
 * While `run` runs (MONITOR, scripts' commands included): the HEXISTS of a job's `deps` Redis ran (a trim's
 * check for a parent), and the mode (ARGV[2]: '', 'p' or 'f') of each trim-2.lua call on `queue`'s `completed`.
 */
async function trimsOf(queue: string, run: () => Promise<unknown>): Promise<{ depsChecks: number; modes: string[] }> {
  const completed = `emq:{${queue}}:completed`
  let depsChecks = 0
  const modes: string[] = []
  await monitorDuring(
    redis.client,
    (name, args) => {
      if (name === 'hexists' && args[2] === 'deps') depsChecks++
      else if ((name === 'evalsha' || name === 'eval') && args[3] === completed && args[4] === `emq:{${queue}}:meta`) {
        const argv = 3 + Number(args[2])
        if (args[argv] === 'completed') modes.push(args[argv + 1] as string)
      }
    },
    run,
  )
  return { depsChecks, modes }
}

describe('opts.parent on Queue.add', () => {
  it('adds a child to an existing parent, which waits for it and then runs with its value', async () => {
    const parents = fx.queue('parents')
    const kids = fx.queue('kids')
    const flow = await fx.producer().add({ name: 'p', queueName: 'parents', children: [{ name: 'a', queueName: 'kids' }] })
    const extra = await kids.add('b', { n: 2 }, { parent: { id: flow.job.id, queue: parents.qualifiedName } })
    expect(extra.parentKey).toBe(`emq:{parents}:${flow.job.id}`)
    expect(parents.qualifiedName).toBe('emq:{parents}')
    expect(extra.queueName).toBe('kids')
    const parent = (await parents.getJob(flow.job.id)) as Job
    expect(await parent.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 2 })
    let values: unknown
    fx.worker('kids', (job) => job.name)
    fx.worker('parents', async (job) => {
      values = await job.getChildrenValues()
      expect(job.queueQualifiedName).toBe('emq:{parents}')
    })
    await waitFor(async () => (await parents.getJobState(flow.job.id)) === 'completed', { what: 'the parent completed' })
    expect(values).toEqual({ [`emq:{kids}:${flow.children?.[0]?.job.id}`]: 'a', [`emq:{kids}:${extra.id}`]: 'b' })
  })

  it('a flow added again with the id of a parent still waiting makes it wait for the new children too', async () => {
    const parents = fx.queue('parents')
    fx.queue('kids')
    const flow = () => fx.producer()
    await flow().add({
      name: 'p',
      queueName: 'parents',
      opts: { jobId: 'P1' },
      children: [{ name: 'a', queueName: 'kids', opts: { jobId: 'C1' } }],
    })
    await flow().add({
      name: 'p',
      queueName: 'parents',
      opts: { jobId: 'P1' },
      children: [{ name: 'b', queueName: 'kids', opts: { jobId: 'C2' } }],
    })
    const parent = (await parents.getJob('P1')) as Job
    expect(await parent.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 2 })
    let values: unknown
    fx.worker('kids', (job) => job.name)
    fx.worker('parents', async (job) => {
      values = await job.getChildrenValues()
    })
    await waitFor(async () => (await parents.getJobState('P1')) === 'completed', { what: 'the parent completed' })
    expect(values).toEqual({ 'emq:{kids}:C1': 'a', 'emq:{kids}:C2': 'b' })
  })

  it('refuses a parent that does not exist, or a bad one, with nothing written', async () => {
    const kids = fx.queue('kids')
    // The Queue registers itself when made (the registry key), before any add: the ping comes after it.
    await kids.waitUntilReady()
    const before = await snapshot(redis.client)
    expect(Object.keys(before)).toEqual(['emq:queues'])
    const missing = await kids.add('x', {}, { parent: { id: 'nope', queue: 'emq:{parents}' } }).catch((e: unknown) => e)
    expect((missing as EchoMQError).code).toBe('ERR_JOB_MISSING')
    for (const parent of [{ id: 'p' }, { id: 'p', queue: 'emq:{bad queue}' }, { id: 12, queue: 'emq:{parents}' }, 'emq:{parents}:p']) {
      const err = await kids.add('x', {}, { parent } as never).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(EchoMQError)
    }
    const both = await kids
      .add('x', {}, { parent: { id: 'p', queue: 'emq:{parents}' }, failParentOnFailure: true, ignoreDependencyOnFailure: true })
      .catch((e: unknown) => e)
    expect((both as EchoMQError).message).toMatch(/cannot be used together/)
    // No job, no parent's dependency, not even a block of ids reserved for the child.
    expect(await snapshot(redis.client)).toEqual(before)
    // A custom id, and a generated one taken from a block already in hand (ids come in blocks of 1, 2, 4...,
    // so after two adds one is left): nothing written either.
    await kids.add('y', {})
    await kids.add('y', {})
    const withIds = await snapshot(redis.client)
    for (const jobId of ['custom', undefined]) {
      const opts = { ...(jobId ? { jobId } : {}), parent: { id: 'nope', queue: 'emq:{parents}' } }
      const err = await kids.add('x', {}, opts).catch((e: unknown) => e)
      expect((err as EchoMQError).code).toBe('ERR_JOB_MISSING')
    }
    expect(await snapshot(redis.client)).toEqual(withIds)
  })
})

describe('opts.parent on Queue.addBulk', () => {
  it('adds children to existing parents beside plain jobs, in order; each parent waits for its new ones', async () => {
    const parents = fx.queue('parents')
    const kids = fx.queue('kids')
    const producer = fx.producer()
    const p1 = await producer.add({ name: 'p1', queueName: 'parents', children: [{ name: 'a', queueName: 'kids', opts: { jobId: 'A' } }] })
    const p2 = await producer.add({ name: 'p2', queueName: 'parents', children: [{ name: 'z', queueName: 'kids', opts: { jobId: 'Z' } }] })
    const under = (id: string) => ({ parent: { id, queue: parents.qualifiedName } })
    const jobs = await kids.addBulk([
      { name: 'b', data: {}, opts: under(p1.job.id) },
      { name: 'plain', data: {} },
      { name: 'c', data: {}, opts: { ...under(p1.job.id), jobId: 'C' } },
      { name: 'y', data: {}, opts: { ...under(p2.job.id), ignoreDependencyOnFailure: true } },
    ])
    expect(jobs.map((j) => [j.name, j.parentKey])).toEqual([
      ['b', `emq:{parents}:${p1.job.id}`],
      ['plain', undefined],
      ['c', `emq:{parents}:${p1.job.id}`],
      ['y', `emq:{parents}:${p2.job.id}`],
    ])
    expect(jobs[3]?.opts.ignoreDependencyOnFailure).toBe(true)
    expect(await redis.client.zcard('emq:{parents}:adding')).toBe(0)
    const values = new Map<string, unknown>()
    fx.worker('kids', (job) => job.name)
    fx.worker('parents', async (job) => {
      values.set(job.name, await job.getChildrenValues())
    })
    await waitFor(async () => values.size === 2, { what: 'both parents completed' })
    const [b, plain, , y] = jobs.map((j) => j.id)
    expect(values.get('p1')).toEqual({ 'emq:{kids}:A': 'a', [`emq:{kids}:${b}`]: 'b', 'emq:{kids}:C': 'c' })
    expect(values.get('p2')).toEqual({ 'emq:{kids}:Z': 'z', [`emq:{kids}:${y}`]: 'y' })
    expect(await kids.getJobState(plain as string)).toBe('completed')
  })

  it('a missing parent among several rejects the whole call with nothing written', async () => {
    fx.queue('parents')
    const kids = fx.queue('kids')
    const flow = await fx.producer().add({ name: 'p', queueName: 'parents', children: [{ name: 'a', queueName: 'kids' }] })
    const before = await snapshot(redis.client)
    const err = (await kids
      .addBulk([
        { name: 'plain', data: {} },
        { name: 'b', data: {}, opts: { parent: { id: flow.job.id, queue: 'emq:{parents}' } } },
        { name: 'c', data: {}, opts: { parent: { id: 'nope', queue: 'emq:{parents}' } } },
      ])
      .catch((e: unknown) => e)) as EchoMQError
    expect([err.code, err.message]).toEqual([
      'ERR_JOB_MISSING',
      'Missing key for parent job emq:{parents}:nope: no job added to queue kids',
    ])
    expect(await snapshot(redis.client)).toEqual(before)
  })
})

describe('job.moveToWaitingChildren', () => {
  it('parks a running parent until its new child ends, then runs it again; without pending children it says false', async () => {
    const parents = fx.queue('parents')
    const kids = fx.queue('kids')
    const job = await parents.add('p', { step: 0 })
    const steps: string[] = []
    // The child ends only once its parent has parked: otherwise the parent would find nothing pending.
    let parked: () => void = () => undefined
    const hasParked = new Promise<void>((resolve) => {
      parked = resolve
    })
    fx.worker('kids', async () => {
      await hasParked
      return 'child done'
    })
    fx.worker('parents', async (j, token) => {
      if (j.data.step === 0) {
        expect(await j.moveToWaitingChildren(token)).toBe(false)
        await kids.add('c', {}, { parent: { id: j.id, queue: parents.qualifiedName } })
        await j.updateData({ step: 1 })
        steps.push('parked')
        expect(await j.moveToWaitingChildren(token)).toBe(true)
        parked()
        throw new WaitingChildrenError()
      }
      steps.push(`resumed ${Object.values(await j.getChildrenValues()).join()}`)
      return 'end'
    })
    await waitFor(async () => (await parents.getJobState(job.id)) === 'completed', { what: 'the parent completed' })
    expect(steps).toEqual(['parked', 'resumed child done'])
    const done = await parents.getJob(job.id)
    expect(done?.attemptsMade).toBe(1)
  })

  it('is fenced by the run token', async () => {
    const parents = fx.queue('parents')
    const flow = await fx.producer().add({ name: 'p', queueName: 'parents', children: [{ name: 'c', queueName: 'kids' }] })
    const job = (await parents.getJob(flow.job.id)) as Job
    const err = await job.moveToWaitingChildren('someone:1').catch((e: unknown) => e)
    expect((err as EchoMQError).code).toMatch(/ERR_LOCK_LOST|ERR_JOB_STATE/)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
  })
})

describe('removing', () => {
  it('a parent removes its children in every queue; a removed child releases its parent when it was the last', async () => {
    const parents = fx.queue('parents')
    const kids = fx.queue('kids')
    const flow = await fx.producer().add({
      name: 'p',
      queueName: 'parents',
      children: [{ name: 'a', queueName: 'kids', children: [{ name: 'g', queueName: 'grand' }] }],
    })
    await parents.remove(flow.job.id)
    expect(await parents.getJobState(flow.job.id)).toBe('unknown')
    expect(await kids.getJobState(flow.children?.[0]?.job.id as string)).toBe('unknown')
    expect(await fx.queue('grand').getJobState(flow.children?.[0]?.children?.[0]?.job.id as string)).toBe('unknown')
    expect(await parents.getWaitingChildrenCount()).toBe(0)

    const second = await fx.producer().add({ name: 'p', queueName: 'parents', children: [{ name: 'a', queueName: 'kids' }] })
    await kids.remove(second.children?.[0]?.job.id as string)
    expect(await parents.getJobState(second.job.id)).toBe('waiting')
  })

  it('a tree deeper than a flow may be (built with opts.parent) goes whole; no job is left under a removed parent', async () => {
    const deep = fx.queue('deep')
    const root = await deep.add('root', {}, { delay: 3_600_000 })
    const ids = [root.id as string]
    for (let i = 0; i < 105; i++) {
      const child = await deep.add('n', {}, { delay: 3_600_000, parent: { id: ids.at(-1) as string, queue: deep.qualifiedName } })
      ids.push(child.id as string)
    }
    expect(await deep.remove(root.id as string)).toBe(1)
    const states = await Promise.all(ids.map((id) => deep.getJobState(id)))
    expect(states.filter((s) => s !== 'unknown')).toEqual([])
    expect(await redis.client.hget('emq:{deep}:meta', 'parents')).toBeNull()
  })

  it('a flow too deep or too large is refused naming its flow, in a short message, with nothing written', async () => {
    type Node = { name: string; queueName: string; children?: Node[] }
    let deepest: Node = { name: 'leaf', queueName: 'limits' }
    for (let i = 0; i < 101; i++) deepest = { name: 'n', queueName: 'limits', children: [deepest] }
    const tooDeep = await fx
      .producer()
      .add(deepest)
      .catch((e: unknown) => e)
    expect(tooDeep).toBeInstanceOf(EchoMQError)
    expect((tooDeep as Error).message).toMatch(/a flow may be at most 100 levels deep \(a node at level 10\d\)$/)
    expect((tooDeep as Error).message.length).toBeLessThan(120)
    const wide = { name: 'p', queueName: 'limits', children: Array.from({ length: 10_000 }, () => ({ name: 'c', queueName: 'limits' })) }
    const tooLarge = await fx
      .producer()
      .add(wide)
      .catch((e: unknown) => e)
    expect((tooLarge as Error).message).toMatch(/adds at most 10000 jobs .*several calls$/)
    expect(await redis.client.keys('emq:{limits}:*')).toEqual([])
  })

  it('a cycle of parents (an existing job made a child of its own child) is removed, and the removal ends', async () => {
    const loop = fx.queue('loop')
    const flow = await fx
      .producer()
      .add({ name: 'x', queueName: 'loop', children: [{ name: 'y', queueName: 'loop', children: [{ name: 'z', queueName: 'loop' }] }] })
    const x = flow.job.id as string
    const y = flow.children?.[0]?.job.id as string
    await loop.add('x', {}, { jobId: x, parent: { id: y, queue: loop.qualifiedName } })
    expect(await loop.remove(x)).toBe(1)
    const left = await Promise.all([x, y, flow.children?.[0]?.children?.[0]?.job.id as string].map((id) => loop.getJobState(id)))
    expect(left).toEqual(['unknown', 'unknown', 'unknown'])
  })
})

describe('retention', () => {
  it("a parent trimmed from completed takes its children's values with it", async () => {
    const parents = fx.queue('parents')
    const ids: string[] = []
    for (let i = 0; i < 2; i++) {
      const f = await fx.producer().add({
        name: 'p',
        queueName: 'parents',
        opts: { removeOnComplete: 1 },
        children: [{ name: 'c', queueName: 'kids' }],
      })
      ids.push(f.job.id)
    }
    fx.worker('kids', () => 'v')
    fx.worker('parents', () => 'done')
    await waitFor(async () => (await parents.getCompletedCount()) === 2, { what: 'both parents completed' })
    expect(await redis.client.exists(`emq:{parents}:${ids[0]}:processed`)).toBe(1)
    await sweep(redis.url, 'parents')
    const gone = (await parents.getJobState(ids[0] as string)) === 'unknown' ? (ids[0] as string) : (ids[1] as string)
    expect(await parents.getJobState(gone)).toBe('unknown')
    expect(await redis.client.exists(`emq:{parents}:${gone}:processed`)).toBe(0)
  })

  it('a queue that never had a parent trims without flow keys; the first parent counts in its queue, adopted or added', async () => {
    const plain = fx.queue('plain-trim')
    await plain.addBulk([0, 1, 2].map((i) => ({ name: 'j', data: { i }, opts: { removeOnComplete: 1 } })))
    fx.worker('plain-trim', () => 'ok')
    await waitFor(async () => (await plain.getCompletedCount()) === 3, { what: 'the plain jobs ran' })
    const { depsChecks, modes } = await trimsOf('plain-trim', () => sweep(redis.url, 'plain-trim'))
    expect(await plain.getCompletedCount()).toBe(1)
    expect({ depsChecks, modes }).toEqual({ depsChecks: 0, modes: [''] })
    expect(await redis.client.hmget('emq:{plain-trim}:meta', 'parents', 'flows')).toEqual([null, null])

    const adopting = fx.queue('adopting')
    const parent = await adopting.add('p', {}, { delay: 60_000 })
    expect(await redis.client.hexists('emq:{adopting}:meta', 'parents')).toBe(0)
    await fx.queue('kids').add('c', {}, { parent: { id: parent.id as string, queue: adopting.qualifiedName } })
    expect(await redis.client.hget('emq:{adopting}:meta', 'parents')).toBe('1')
    expect(await redis.client.hget(`emq:{adopting}:${parent.id}`, 'deps')).toBe('1')
    await fx.producer().add({ name: 'p', queueName: 'flowing', children: [{ name: 'c', queueName: 'kids' }] })
    expect(await redis.client.hget('emq:{flowing}:meta', 'parents')).toBe('1')
    expect(await redis.client.hexists('emq:{kids}:meta', 'parents')).toBe(0)
    // `flows` is the mark of earlier versions: never written now.
    for (const q of ['adopting', 'flowing', 'kids']) expect(await redis.client.hexists(`emq:{${q}}:meta`, 'flows')).toBe(0)
  })

  it('a queue of parents and children trims both: the children without flow keys, the parents with theirs', async () => {
    const mixed = fx.queue('mixed')
    const parents: string[] = []
    for (let i = 0; i < 3; i++) {
      const f = await fx.producer().add({
        name: 'p',
        queueName: 'mixed',
        opts: { removeOnComplete: 1 },
        children: [0, 1].map((c) => ({ name: 'c', queueName: 'mixed', data: { c }, opts: { removeOnComplete: 1 } })),
      })
      parents.push(f.job.id)
    }
    fx.worker('mixed', () => 'v')
    await waitFor(
      async () => (await mixed.getJobCounts('waiting-children', 'wait', 'active')).active === 0 && (await mixed.getCompletedCount()) === 9,
      {
        what: 'the three flows completed',
      },
    )
    await sweep(redis.url, 'mixed')
    expect(await mixed.getCompletedCount()).toBe(1)
    // A parent is gone with its children's values, or (the one job kept) still has both.
    const left = await Promise.all(parents.map((id) => redis.client.exists(`emq:{mixed}:${id}`, `emq:{mixed}:${id}:processed`)))
    expect(left.filter((n) => n === 0).length).toBeGreaterThanOrEqual(2)
    expect(left.filter((n) => n !== 0 && n !== 2)).toEqual([])
  })
})

describe("meta's count of parents", () => {
  const parentsOf = (queue: string) => redis.client.hget(`emq:{${queue}}:meta`, 'parents')

  /** A parent in `queue` (its options `opts`) with one child in `kids`. */
  const flowIn = (queue: string, opts: Record<string, unknown> = {}) =>
    fx.producer().add({ name: 'p', queueName: queue, opts, children: [{ name: 'c', queueName: 'kids' }] })

  /** Plain jobs finished past a retention of 1 are trimmed by a sweep with no parent checked: no HEXISTS, one call. */
  async function expectPlainTrims(queue: string, kept = 1): Promise<string[]> {
    const q = fx.queue(queue)
    const before = await q.getCompletedCount()
    await q.addBulk([0, 1, 2].map((i) => ({ name: 'j', data: { i }, opts: { removeOnComplete: kept } })))
    await waitFor(async () => (await q.getCompletedCount()) === before + 3, { what: `the plain jobs of ${queue} ran` })
    const { depsChecks, modes } = await trimsOf(queue, () => sweep(redis.url, queue))
    expect(await q.getCompletedCount()).toBe(kept)
    expect(depsChecks).toBe(0)
    return modes
  }

  it('counts a parent once however often it gets children, and each parent', async () => {
    const counted = fx.queue('counted')
    const kids = fx.queue('kids')
    const parent = await counted.add('p', {}, { delay: 60_000 })
    const under = { parent: { id: parent.id as string, queue: counted.qualifiedName } }
    await kids.add('c1', {}, under)
    await kids.add('c2', {}, under)
    expect(await parentsOf('counted')).toBe('1')
    // A parent still waiting for its children, added again with new ones (addFlow-10.lua), is not counted twice.
    const again = () =>
      fx.producer().add({
        name: 'p',
        queueName: 'counted',
        opts: { jobId: 'P1' },
        children: [{ name: 'c', queueName: 'kids' }],
      })
    await again()
    expect(await parentsOf('counted')).toBe('2')
    await again()
    expect(await parentsOf('counted')).toBe('2')
    expect(await (await counted.getJob('P1'))?.getDependenciesCount({ unprocessed: true })).toEqual({ unprocessed: 2 })
    // A tree's second level is one call here writing two parents (each child has a child of its own).
    await fx.producer().add({
      name: 'p',
      queueName: 'counted',
      children: [0, 1].map((i) => ({ name: 'c', queueName: 'counted', data: { i }, children: [{ name: 'g', queueName: 'kids' }] })),
    })
    expect(await parentsOf('counted')).toBe('5')
    expect(await parentsOf('kids')).toBe(null)
  })

  it('falls to 0 and goes when the last parent is trimmed; then a trim checks no job', async () => {
    const trimmed = fx.queue('trimmed')
    const flows = [await flowIn('trimmed', { removeOnComplete: 1 }), await flowIn('trimmed', { removeOnComplete: 1 })]
    expect(await parentsOf('trimmed')).toBe('2')
    fx.worker('kids', () => 'v')
    fx.worker('trimmed', () => 'done')
    await waitFor(async () => (await trimmed.getCompletedCount()) === 2, { what: 'both parents completed' })
    await trimmed.add('j', {}, { removeOnComplete: 1 })
    await waitFor(async () => (await trimmed.getCompletedCount()) === 3, { what: 'the plain job completed' })
    const { modes } = await trimsOf('trimmed', () => sweep(redis.url, 'trimmed'))
    // The queue had parents: the first call asks for them apart, the second sends their flow keys.
    expect(modes).toEqual(['', 'p', 'f'])
    expect(await trimmed.getCompletedCount()).toBe(1)
    for (const f of flows) {
      expect(await trimmed.getJobState(f.job.id)).toBe('unknown')
      expect(await redis.client.exists(`emq:{trimmed}:${f.job.id}:processed`)).toBe(0)
    }
    expect(await parentsOf('trimmed')).toBe(null)
    // This process still took the queue for one with parents: its next trim, sent "p", checks no job and
    // says so; the one after it is sent plain.
    expect(await expectPlainTrims('trimmed')).toEqual(['p'])
    expect(await expectPlainTrims('trimmed')).toEqual([''])
  })

  it('falls to 0 and goes when the last parent is removed, by queue.remove or job.remove', async () => {
    const removing = fx.queue('removing')
    const a = await flowIn('removing')
    const b = await removing.add('p', {}, { delay: 60_000 })
    await fx.queue('kids').add('c', {}, { parent: { id: b.id as string, queue: removing.qualifiedName } })
    expect(await parentsOf('removing')).toBe('2')
    await removing.remove(a.job.id)
    expect(await parentsOf('removing')).toBe('1')
    await ((await removing.getJob(b.id as string)) as Job).remove()
    expect(await parentsOf('removing')).toBe(null)
    expect(await redis.client.exists(`emq:{removing}:${b.id}:dependencies`)).toBe(0)
    // A child removed is no parent: the count is not touched.
    const c = await flowIn('removing')
    await fx.queue('kids').remove(c.children?.[0]?.job.id as string)
    expect(await parentsOf('removing')).toBe('1')
    await removing.remove(c.job.id)
    expect(await parentsOf('removing')).toBe(null)
    fx.worker('removing', () => 'ok')
    expect(await expectPlainTrims('removing')).toEqual([''])
  })

  it('falls to 0 and goes when the last parent is cleaned', async () => {
    const cleaning = fx.queue('cleaning')
    const f = await flowIn('cleaning')
    fx.worker('kids', () => 'v')
    fx.worker('cleaning', () => 'done')
    await waitFor(async () => (await cleaning.getJobState(f.job.id)) === 'completed', { what: 'the parent completed' })
    expect(await parentsOf('cleaning')).toBe('1')
    expect(await cleaning.clean(0, 100, 'completed')).toEqual([f.job.id])
    expect(await parentsOf('cleaning')).toBe(null)
    expect(await redis.client.exists(`emq:{cleaning}:${f.job.id}:processed`)).toBe(0)
    expect(await expectPlainTrims('cleaning')).toEqual([''])
  })

  it('falls to 0 and goes when the last parent is drained (its children completed, it waits in wait)', async () => {
    const draining = fx.queue('draining')
    const f = await flowIn('draining')
    fx.worker('kids', () => 'v')
    await waitFor(async () => (await draining.getJobState(f.job.id)) === 'waiting', { what: 'the parent waiting' })
    expect(await parentsOf('draining')).toBe('1')
    await draining.drain()
    expect(await draining.getJobState(f.job.id)).toBe('unknown')
    expect(await parentsOf('draining')).toBe(null)
    expect(await redis.client.exists(`emq:{draining}:${f.job.id}:processed`)).toBe(0)
    fx.worker('draining', () => 'ok')
    expect(await expectPlainTrims('draining')).toEqual([''])
  })

  it("a queue marked by an earlier version (meta's `flows`, parents not counted) still trims parents with their flow keys", async () => {
    const legacy = fx.queue('legacy')
    const f = await flowIn('legacy', { removeOnComplete: 1 })
    // What an earlier version left: the mark, and no count.
    await redis.client.hset('emq:{legacy}:meta', 'flows', '1')
    await redis.client.hdel('emq:{legacy}:meta', 'parents')
    fx.worker('kids', () => 'v')
    fx.worker('legacy', () => 'done')
    await waitFor(async () => (await legacy.getJobState(f.job.id)) === 'completed', { what: 'the parent completed' })
    await legacy.add('j', {}, { removeOnComplete: 1 })
    await waitFor(async () => (await legacy.getCompletedCount()) === 2, { what: 'the plain job completed' })
    await sweep(redis.url, 'legacy')
    expect(await legacy.getJobState(f.job.id)).toBe('unknown')
    expect(await redis.client.exists(`emq:{legacy}:${f.job.id}:processed`)).toBe(0)
    // The parent was never counted in: the count does not go below nothing, and the mark stays.
    expect(await redis.client.hmget('emq:{legacy}:meta', 'parents', 'flows')).toEqual([null, '1'])
    // Its trims still ask each job whether it is a parent.
    await legacy.addBulk([0, 1, 2].map((i) => ({ name: 'j', data: { i }, opts: { removeOnComplete: 1 } })))
    await waitFor(async () => (await legacy.getCompletedCount()) === 4, { what: 'the plain jobs ran' })
    const { depsChecks } = await trimsOf('legacy', () => sweep(redis.url, 'legacy'))
    expect(depsChecks).toBe(3)
    expect(await legacy.getCompletedCount()).toBe(1)
    expect(await redis.client.hget('emq:{legacy}:meta', 'flows')).toBe('1')
  })
})

describe('a released parent', () => {
  it('keeps its priority and its delay; the waiting-children event is emitted', async () => {
    const events = new QueueEvents('parents', { connection: redis.url })
    await events.waitUntilReady()
    const seen: string[] = []
    events.on('waiting-children', ({ jobId }: { jobId: string }) => seen.push(jobId))
    try {
      const parents = fx.queue('parents')
      const a = await fx
        .producer()
        .add({ name: 'p', queueName: 'parents', opts: { priority: 7 }, children: [{ name: 'c', queueName: 'kids' }] })
      const b = await fx
        .producer()
        .add({ name: 'p', queueName: 'parents', opts: { delay: 60_000 }, children: [{ name: 'c', queueName: 'kids' }] })
      fx.worker('kids', () => 'ok')
      await waitFor(
        async () => (await parents.getJobState(a.job.id)) === 'prioritized' && (await parents.getJobState(b.job.id)) === 'delayed',
      )
      await waitFor(() => seen.length === 2, { what: 'two waiting-children events' })
      expect(seen.sort()).toEqual([a.job.id, b.job.id].sort())
    } finally {
      await events.close()
    }
  })
})
