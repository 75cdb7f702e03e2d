/**
 * A flow's keys go with the jobs that clean, drain and obliterate remove (BullMQ's removeJobKeys): a
 * parent's dependencies, processed, failed and unsuccessful keys; obliterate also removes the parents
 * waiting for children, delivers its outbox to the parents it names (in other queues too), and leaves no
 * key of the queue behind.
 */
import { describe, expect, it } from 'vitest'
import type { Job } from '../../lib/index.js'
import { finishRuns, take } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useFlows } from '../helpers/flows.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useFlows(redis)

/** The flow keys of job `id` of `queue` that exist. */
async function flowKeysLeft(queue: string, id: string): Promise<string[]> {
  const k = queueKeys('emq', queue)
  const keys = [k.dependencies(id), k.processed(id), k.failedChildren(id), k.unsuccessful(id)]
  const exist = await Promise.all(keys.map((key) => redis.client.exists(key)))
  return keys.filter((_, i) => exist[i] === 1)
}

/** A parent in `parents` whose one child (in `kids`) completed and was told: the parent then waits to run. */
async function parentWithProcessedChild(parents: string, kids: string): Promise<Job> {
  const parentQueue = fx.queue(parents)
  const flow = await fx.producer().add({ name: 'p', queueName: parents, children: [{ name: 'c', queueName: kids }] })
  fx.worker(kids, () => 'v')
  await waitFor(async () => (await parentQueue.getJobState(flow.job.id)) === 'waiting', { what: 'the parent moved on' })
  expect(await flowKeysLeft(parents, flow.job.id)).toEqual([queueKeys('emq', parents).processed(flow.job.id)])
  return flow.job
}

describe('flow keys removed with their jobs', () => {
  it('drain removes a waiting parent with its children values', async () => {
    const parent = await parentWithProcessedChild('dp', 'dk')
    expect(await fx.queue('dp').drain()).toBeUndefined()
    expect(await fx.queue('dp').getJobState(parent.id)).toBe('unknown')
    expect(await flowKeysLeft('dp', parent.id)).toEqual([])
  })

  it('clean removes a completed parent with its children values', async () => {
    const parent = await parentWithProcessedChild('cp', 'ck')
    const parents = fx.queue('cp')
    fx.worker('cp', () => 'done')
    await waitFor(async () => (await parents.getJobState(parent.id)) === 'completed', { what: 'the parent completed' })
    expect(await flowKeysLeft('cp', parent.id)).toHaveLength(1)
    expect(await parents.clean(0, 0, 'completed')).toEqual([parent.id])
    expect(await flowKeysLeft('cp', parent.id)).toEqual([])
  })

  it('obliterate removes parents waiting for children, tells the parents of its children, and leaves no key', async () => {
    const other = fx.queue('other')
    const gone = fx.queue('gone')
    // A parent waiting in `gone` for a child of `gone` and one of `other`.
    const waiting = await fx.producer().add({
      name: 'p',
      queueName: 'gone',
      children: [
        { name: 'a', queueName: 'gone' },
        { name: 'b', queueName: 'other' },
      ],
    })
    // A child of `gone` whose parent is in `other`: ended by a worker that died before telling the parent.
    const outward = await fx.producer().add({ name: 'q', queueName: 'other', children: [{ name: 'c', queueName: 'gone' }] })
    const childId = outward.children?.[0]?.job.id as string
    const kg = queueKeys('emq', 'gone')
    const taken = await take(redis.client, kg, { workerToken: 'dead', leaseMs: 5_000, workerName: 'dead' }, [childId])
    await finishRuns(redis.client, kg, [{ run: { id: childId, token: taken.taken[0]?.token as string }, action: 'complete', value: '7' }])
    expect(await redis.client.hlen(kg.handoffs)).toBe(1)

    // A parent in `other` waiting for a child of `gone` that has not run.
    const waitingElsewhere = await fx.producer().add({ name: 'r', queueName: 'other', children: [{ name: 'd', queueName: 'gone' }] })

    await gone.obliterate()
    expect(await redis.client.keys('emq:{gone}*')).toEqual([])
    expect(await other.getJobState(waitingElsewhere.job.id)).toBe('waiting')
    expect(await other.getJobState(outward.job.id)).toBe('waiting')
    expect(await outward.job.getChildrenValues()).toEqual({ [`emq:{gone}:${childId}`]: 7 })
    expect(await gone.getJobState(waiting.job.id)).toBe('unknown')
  })
})

describe('a child removed with its outcome not yet told', () => {
  it('its failure under failParentOnFailure still reaches the parent, not a plain removal', async () => {
    const parents = fx.queue('rp')
    const kids = fx.queue('rk')
    const flow = await fx.producer().add({
      name: 'p',
      queueName: 'rp',
      children: [{ name: 'bad', queueName: 'rk', opts: { failParentOnFailure: true } }],
    })
    const childId = flow.children?.[0]?.job.id as string
    const kk = queueKeys('emq', 'rk')
    // A worker fails the child for good and dies before telling the parent.
    const taken = await take(redis.client, kk, { workerToken: 'dead', leaseMs: 5_000, workerName: 'dead' }, [childId])
    await finishRuns(redis.client, kk, [
      { run: { id: childId, token: taken.taken[0]?.token as string }, action: 'fail-final', value: 'no' },
    ])
    expect(await kids.getJobState(childId)).toBe('failed')

    expect(await kids.remove(childId)).toBe(1)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting')
    expect((await parents.getJob(flow.job.id))?.deferredFailure).toBe(`child emq:{rk}:${childId} failed`)
    expect(await redis.client.hlen(kk.handoffs)).toBe(0)
  })
})

describe('drain, clean and flows', () => {
  it('a cleaned failed child (no failure policy) lets its parent stop waiting for it: the last moves it on', async () => {
    const parents = fx.queue('fp')
    const kids = fx.queue('fk')
    const flow = await fx.producer().add({ name: 'p', queueName: 'fp', children: [{ name: 'bad', queueName: 'fk' }] })
    fx.worker('fk', () => {
      throw new Error('no')
    })
    await waitFor(async () => (await kids.getFailedCount()) === 1, { what: 'the child failed' })
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    expect(await kids.clean(0, 0, 'failed')).toEqual([flow.children?.[0]?.job.id])
    expect(await parents.getJobState(flow.job.id)).toBe('waiting')
    expect(await redis.client.hlen(queueKeys('emq', 'fk').handoffs)).toBe(0)
  })

  it('drained children let their parent in another queue stop waiting: after the last, it moves on', async () => {
    const parents = fx.queue('np')
    const kids = fx.queue('nk')
    const flow = await fx.producer().add({
      name: 'p',
      queueName: 'np',
      children: [
        { name: 'a', queueName: 'nk' },
        { name: 'b', queueName: 'nk', opts: { delay: 60_000 } },
      ],
    })
    await kids.drain()
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    expect(await flow.job.getDependencies()).toMatchObject({ unprocessed: [`emq:{nk}:${flow.children?.[1]?.job.id}`] })
    await kids.drain(true)
    expect(await parents.getJobState(flow.job.id)).toBe('waiting')
    expect(await redis.client.hlen(queueKeys('emq', 'nk').handoffs)).toBe(0)
  })
})
