/**
 * A flow's parent removed the moment it ends (a retention of 0: removeOnComplete or removeOnFail true, on
 * the job, in defaultJobOptions or on the Worker; or failed by the sweep for stalling too often) goes with
 * its four flow keys (dependencies, processed, failed, unsuccessful) and its log, as BullMQ's removeJobKeys,
 * and leaves its queue's count of parents (meta `parents`). A job that became a parent while it ran is
 * answered "send its flow keys" by its finish, and goes with them the second time.
 */
import { describe, expect, it } from 'vitest'
import { type Job, sweep, type WorkerOptions } from '../../lib/index.js'
import { take } from '../../lib/redis/commands.js'
import { flowKeys, queueKeys } from '../../lib/redis/keys.js'
import { useFlows } from '../helpers/flows.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useFlows(redis)

/** Every key job `id` of `queue` may own that still exists: its hash, log and flow keys. */
async function keysLeft(queue: string, id: string): Promise<string[]> {
  const k = queueKeys('emq', queue)
  const keys = [k.job(id), k.logs(id), ...flowKeys(k, id)]
  const exist = await Promise.all(keys.map((key) => redis.client.exists(key)))
  return keys.filter((_, i) => exist[i] === 1)
}

const metaOf = (queue: string) => redis.client.hmget(`emq:{${queue}}:meta`, 'parents', 'adopted')

/**
 * A parent in `queue` (its options `opts`, the flow's `defaults` as queuesOptions) whose one child in `kids`
 * completed: the parent then waits to run, its children's values in `processed`.
 */
async function parentReady(queue: string, opts: Record<string, unknown>, defaults?: Record<string, unknown>): Promise<string> {
  const flow = await fx
    .producer()
    .add(
      { name: 'p', queueName: queue, opts, children: [{ name: 'c', queueName: 'kids' }] },
      defaults ? { queuesOptions: { [queue]: { defaultJobOptions: defaults } } } : undefined,
    )
  fx.worker('kids', () => 'v')
  await waitFor(async () => (await fx.queue(queue).getJobState(flow.job.id)) === 'waiting', { what: 'the parent waits to run' })
  expect(await keysLeft(queue, flow.job.id)).toEqual([
    queueKeys('emq', queue).job(flow.job.id),
    queueKeys('emq', queue).processed(flow.job.id),
  ])
  expect((await metaOf(queue))[0]).toBe('1')
  return flow.job.id
}

/** Resolves once job `id` of `queue` is gone, then says every key it owned is gone too, and its queue has no parent left. */
async function expectGoneWithItsKeys(queue: string, id: string): Promise<void> {
  await waitFor(async () => (await redis.client.exists(queueKeys('emq', queue).job(id))) === 0, { what: 'the parent removed' })
  expect(await keysLeft(queue, id)).toEqual([])
  expect((await metaOf(queue))[0]).toBeNull()
}

/** A processor that logs a line (so the job has a log key to lose) and then ends as `end` says. */
const logged = (end: () => unknown) => async (job: Job) => {
  await job.log('a line')
  return end()
}

describe('a parent removed as it completes', () => {
  const cases: [string, Record<string, unknown>, Record<string, unknown> | undefined, WorkerOptions][] = [
    ['its own removeOnComplete: true', { removeOnComplete: true }, undefined, {}],
    ["the flow's defaultJobOptions", {}, { removeOnComplete: true }, {}],
    ["the Worker's removeOnComplete: true", {}, undefined, { removeOnComplete: true }],
  ]
  it.each(cases)('goes with its log and its flow keys (%s), and leaves the count of parents', async (_, opts, defaults, worker) => {
    const id = await parentReady('rp', opts, defaults)
    fx.worker(
      'rp',
      logged(() => 'done'),
      worker,
    )
    await expectGoneWithItsKeys('rp', id)
    // Known as a parent when it was taken: no finish needed to read `deps`.
    expect((await metaOf('rp'))[1]).toBeNull()
  })
})

describe('a parent removed as it fails', () => {
  const cases: [string, Record<string, unknown>, WorkerOptions][] = [
    ['its own removeOnFail: true', { removeOnFail: true, attempts: 1 }, {}],
    ["the Worker's removeOnFail: true", { attempts: 1 }, { removeOnFail: true }],
  ]
  it.each(cases)('goes with its log and its flow keys (%s), and leaves the count of parents', async (_, opts, worker) => {
    const id = await parentReady('fp', opts)
    fx.worker(
      'fp',
      logged(() => {
        throw new Error('no')
      }),
      worker,
    )
    await expectGoneWithItsKeys('fp', id)
  })

  it('failed by the sweep for stalling too often, goes with its flow keys (set apart, then failed with them)', async () => {
    const id = await parentReady('sp', { removeOnFail: true })
    const keys = queueKeys('emq', 'sp')
    // A worker takes it and dies: its lease lapses at once. It stalled once before: the next stall fails it.
    const { taken } = await take(redis.client, keys, { workerToken: 'dead', leaseMs: 1, workerName: 'dead' }, [id])
    expect(taken.map((t) => [t.job.id, t.parent])).toEqual([[id, true]])
    await redis.client.hset(keys.job(id), 'stalledCounter', '1')
    await redis.client.rpush(keys.logs(id), 'a line')
    const failed = await waitFor(
      async () => {
        const pass = await sweep(redis.url, 'sp', { graceMs: 0 })
        return pass.failed.length > 0 && pass
      },
      { what: 'the stall-fail' },
    )
    expect(failed).toEqual({ marked: [], recovered: [], failed: [id] })
    expect(await keysLeft('sp', id)).toEqual([])
    expect((await metaOf('sp'))[0]).toBeNull()
    expect(await redis.client.zcard(keys.failed)).toBe(0)
    expect(await redis.client.zcard(keys.active)).toBe(0)
  })
})

describe('a job that became a parent while it ran', () => {
  const cases: [string, Record<string, unknown>, WorkerOptions][] = [
    ['its own removeOnComplete: true', { removeOnComplete: true }, {}],
    ["the Worker's removeOnComplete: true (taken as a plain run)", {}, { removeOnComplete: true }],
  ]
  it.each(cases)('is removed with its flow keys as it completes (%s)', async (_, opts, worker) => {
    const queue = fx.queue('ap')
    const kids = fx.queue('kids')
    const job = await queue.add('p', {}, opts)
    const ended: string[] = []
    const w = fx.worker(
      'ap',
      async (j) => {
        await j.log('a line')
        // A child added to the running job (BullMQ's opts.parent): it becomes a parent as it runs.
        await kids.add('c', {}, { parent: { id: j.id, queue: j.queueQualifiedName } })
        return 'done'
      },
      worker,
    )
    w.on('completed', (j) => ended.push(j.id))
    await waitFor(() => ended.includes(job.id as string), { what: 'the job completed' })
    // Its queue now reads every finish in full (meta `adopted`): the finish found it a parent and asked
    // for its flow keys, which its second call sent.
    expect((await metaOf('ap'))[1]).toBe('1')
    expect(await keysLeft('ap', job.id as string)).toEqual([])
    expect((await metaOf('ap'))[0]).toBeNull()
    expect(await queue.getCompletedCount()).toBe(0)
  })
})
