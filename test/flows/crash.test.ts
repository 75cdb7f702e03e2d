/**
 * Crash safety of a flow's hand-off (lib/flows/handoffs.ts), counted: a worker SIGKILLed after ending a
 * child but before telling its parent (Redis refuses the telling by ACL, so the point is exact; the entry
 * stays in the child queue's outbox, the sweep delivers it);
 * a child failed by the sweep for stalling too often (the sweep writes and delivers the entry); parents
 * whose last children end while sweeps of the child queue overlap. In each, no parent runs early, twice
 * or never.
 */
import { describe, expect, it } from 'vitest'
import { deliverHandoffs } from '../../lib/flows/handoffs.js'
import { type Job, sweep } from '../../lib/index.js'
import { JOB_DEFAULTS } from '../../lib/job-options.js'
import { addFlowNodes, type FlowNodeArgs, finishRuns, take } from '../../lib/redis/commands.js'
import { encodeOptions } from '../../lib/redis/job-codec.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useFlows } from '../helpers/flows.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { spawnWorker } from '../helpers/worker-process.js'

const redis = useRedis()
const fx = useFlows(redis)

/**
 * Takes `childId` as worker `token` and fails it for good, as a worker whose finish reached Redis but not
 * yet the parent: returns the outbox entry that finish wrote, [childId, entry], for deliverHandoffs.
 */
async function failChildFinally(keys: ReturnType<typeof queueKeys>, childId: string, token: string): Promise<[string, string]> {
  const taken = await take(redis.client, keys, { workerToken: token, leaseMs: 5_000, workerName: token }, [childId])
  const run = { id: childId, token: taken.taken[0]?.token as string }
  const reply = await finishRuns(redis.client, keys, [{ run, action: 'fail-final', value: 'boom' }])
  return [childId, reply.runs[0]?.handoff as string]
}
const kids = queueKeys('emq', 'kids')

/** Runs of each parent, by id, as the `parents` worker sees them. */
function parentRuns() {
  const runs = new Map<string, number>()
  fx.worker('parents', (job) => {
    runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
    return job.getChildrenValues()
  })
  return runs
}

describe('a flow survives', () => {
  it('a worker SIGKILLed between ending the last child and telling its parent: the sweep tells it, the parent runs once', async () => {
    const flow = await fx.producer().add({ name: 'p', queueName: 'parents', children: [{ name: 'c', queueName: 'kids' }] })
    const childId = flow.children?.[0]?.job.id as string
    // The worker may write its own queue's keys only: Redis refuses its hand-off to the parent (settleChild,
    // in {parents}), so the entry stays as a crash right after the finish would leave it; the process then
    // freezes at the child's event and is SIGKILLed.
    await redis.client.call('ACL', 'SETUSER', 'kidsonly', 'reset', 'on', '>kidsonly', '~emq:{kids}:*', '~emq:queues', '%R~*', '&*', '+@all')
    const url = redis.url.replace('redis://', 'redis://kidsonly:kidsonly@')
    const child = await spawnWorker({ REDIS_URL: url, QUEUE: 'kids', FREEZE_ON_COMPLETED: '1', SKIP_STALLED_CHECK: '1' })
    try {
      await child.waitForMessage('active', childId)
      child.finish(childId)
      await child.waitForMessage('completed', childId)
      await child.stop()
    } finally {
      await child.stop()
      await redis.client.call('ACL', 'DELUSER', 'kidsonly')
    }
    expect(await redis.client.hexists(kids.handoffs, childId)).toBe(1)
    const parents = fx.queue('parents')
    expect(await fx.queue('kids').getJobState(childId)).toBe('completed')
    expect(await parents.getJobState(flow.job.id)).toBe('waiting-children')
    const runs = parentRuns()
    // Nobody told the parent: it has not run.
    expect(runs.size).toBe(0)
    // Two sweeps at once deliver the entry: the parent moves on once.
    await Promise.all([sweep(redis.url, 'kids'), sweep(redis.url, 'kids')])
    await waitFor(async () => (await parents.getJobState(flow.job.id)) === 'completed', { what: 'the parent completed' })
    expect(await redis.client.hlen(kids.handoffs)).toBe(0)
    await sweep(redis.url, 'kids')
    expect([...runs.entries()]).toEqual([[flow.job.id, 1]])
    const parent = await parents.getJob(flow.job.id)
    expect(parent?.returnValue).toEqual({ [`emq:{kids}:${childId}`]: { doneBy: expect.any(Number) } })
  })

  /**
   * A flow whose one child (with `opts`) is taken by a worker process that stops holding it, then failed by
   * the sweep (0 stalls allowed: phase 1 marks the lapsed lease, phase 2 fails it and tells the parent);
   * resolves once the parent completed.
   */
  async function stallFailChild(opts: Record<string, unknown>) {
    const flow = await fx.producer().add({ name: 'p', queueName: 'parents', children: [{ name: 'c', queueName: 'kids', opts }] })
    const childId = flow.children?.[0]?.job.id as string
    const child = await spawnWorker({
      REDIS_URL: redis.url,
      QUEUE: 'kids',
      MAX_STALLED_COUNT: '0',
      SKIP_STALLED_CHECK: '1',
      LOCK_MS: '200',
    })
    try {
      await child.waitForMessage('active', childId)
    } finally {
      await child.stop()
    }
    const runs = parentRuns()
    const parents = fx.queue('parents')
    await waitFor(async () => (await sweep(redis.url, 'kids', { graceMs: 0 })).failed.includes(childId), { what: 'the stall-fail' })
    await waitFor(async () => (await parents.getJobState(flow.job.id)) === 'completed', { what: 'the parent completed' })
    return { flow, childId, runs, parents }
  }

  it('a child that stalls past the allowance: the sweep fails it and tells its parent (ignoreDependencyOnFailure)', async () => {
    const { flow, childId, runs, parents } = await stallFailChild({ ignoreDependencyOnFailure: true })
    expect([...runs.entries()]).toEqual([[flow.job.id, 1]])
    const parent = await parents.getJob(flow.job.id)
    expect(await parent?.getIgnoredChildrenFailures()).toEqual({ [`emq:{kids}:${childId}`]: 'job stalled more than allowable limit' })
    expect(await redis.client.hlen(kids.handoffs)).toBe(0)
  })

  it('a child with no policy removed as the sweep fails it (removeOnFail): its parent stops waiting for it and runs', async () => {
    const { flow, childId, runs, parents } = await stallFailChild({ removeOnFail: true })
    expect([...runs.entries()]).toEqual([[flow.job.id, 1]])
    expect(await fx.queue('kids').getJob(childId)).toBeUndefined()
    expect(await (await parents.getJob(flow.job.id))?.getDependenciesCount()).toEqual({
      processed: 0,
      unprocessed: 0,
      ignored: 0,
      failed: 0,
    })
  })

  it('deliveries of a retried child that cross: a failure told after the retry, a retry told after the rerun, change nothing', async () => {
    const flow = await fx.producer().add({
      name: 'p',
      queueName: 'parents',
      children: [{ name: 'c', queueName: 'kids', opts: { ignoreDependencyOnFailure: true } }],
    })
    const childId = flow.children?.[0]?.job.id as string
    const childKey = kids.job(childId)
    const parent = (await fx.queue('parents').getJob(flow.job.id)) as Job
    // A worker fails the child, and has not told the parent yet: it holds the entry.
    const failOnce = (token: string) => failChildFinally(kids, childId, token)
    const first = await failOnce('w1')
    // The child is retried meanwhile: the retry tells the parent before it resolves.
    await fx.queue('kids').retryJobs({ ids: [childId] })
    const retried = [childId, (await redis.client.hget(kids.handoffs, childId)) ?? ''] as [string, string]
    expect(await parent.getDependencies()).toEqual({ processed: {}, unprocessed: [childKey], ignored: {}, failed: [] })
    // The slow worker's failure arrives now: stale, the child stays pending.
    await deliverHandoffs(redis.client, kids, [first])
    expect(await parent.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 1, ignored: 0, failed: 0 })
    expect(await parent.getState()).toBe('waiting-children')
    // The rerun fails too and is told: the parent moves on with it ignored.
    await deliverHandoffs(redis.client, kids, [await failOnce('w2')])
    expect(await parent.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 0, ignored: 1, failed: 0 })
    // A sweep that read the retry's entry early delivers it now: stale too, the child is not pending again.
    await deliverHandoffs(redis.client, kids, [retried])
    expect(await parent.getDependenciesCount()).toEqual({ processed: 0, unprocessed: 0, ignored: 1, failed: 0 })
    expect(await parent.getState()).toBe('waiting')
  })

  it("a parent in its child's queue: the settle call deletes the entry it delivered, and keeps one rewritten since", async () => {
    const solo = queueKeys('emq', 'solo')
    const flow = await fx.producer().add({
      name: 'p',
      queueName: 'solo',
      children: [{ name: 'c', queueName: 'solo', opts: { ignoreDependencyOnFailure: true } }],
    })
    const childId = flow.children?.[0]?.job.id as string
    const failOnce = (token: string) => failChildFinally(solo, childId, token)
    const first = await failOnce('w1')
    await fx.queue('solo').retryJobs({ ids: [childId] })
    const held = await redis.client.hget(solo.handoffs, childId)
    expect(held).not.toBe(first[1])
    // The slow worker's entry is stale: settled as such, and the retry's entry stays in the outbox.
    await deliverHandoffs(redis.client, solo, [first])
    expect(await redis.client.hget(solo.handoffs, childId)).toBe(held)
    await deliverHandoffs(redis.client, solo, [[childId, held as string]])
    expect(await redis.client.hexists(solo.handoffs, childId)).toBe(0)
    const second = await failOnce('w2')
    await deliverHandoffs(redis.client, solo, [second])
    expect(await redis.client.hlen(solo.handoffs)).toBe(0)
    expect(await fx.queue('solo').getJobState(flow.job.id)).toBe('waiting')
  })

  it('an outbox entry as JSON (written before the compact format) is still delivered, and deleted with its settle', async () => {
    const solo = queueKeys('emq', 'legacy')
    const flow = await fx.producer().add({
      name: 'p',
      queueName: 'legacy',
      children: [
        { name: 'a', queueName: 'legacy' },
        { name: 'b', queueName: 'legacy' },
      ],
    })
    const [a, b] = (flow.children ?? []).map((c) => c.job.id as string)
    // The compact form: a completed child's entry, then a JSON one as an older EchoMQ wrote it.
    const compact = `c\n${solo.job(flow.job.id as string)}\n"va"`
    const legacy = JSON.stringify({ parentKey: solo.job(flow.job.id as string), outcome: 'completed', value: '"vb"' })
    await redis.client.hset(solo.handoffs, a as string, compact, b as string, legacy)
    await deliverHandoffs(redis.client, solo, [
      [a as string, compact],
      [b as string, legacy],
    ])
    expect(await redis.client.hlen(solo.handoffs)).toBe(0)
    expect(await redis.client.hgetall(solo.processed(flow.job.id as string))).toEqual({
      [solo.job(a as string)]: '"va"',
      [solo.job(b as string)]: '"vb"',
    })
    expect(await fx.queue('legacy').getJobState(flow.job.id as string)).toBe('waiting')
  })

  it('a producer that stops between two levels: the sweep fails the parent for the child never written', async () => {
    const parents = queueKeys('emq', 'parents')
    const node = (id: string, children: string[], parentKey = '', parent = ''): FlowNodeArgs => ({
      ...encodeOptions(JOB_DEFAULTS),
      id,
      name: id,
      data: '{}',
      parentKey,
      parent,
      children,
    })
    // What FlowProducer.add writes first (the parent, in waiting-children and in `adding`), and one of its
    // two children: then the producer dies.
    await addFlowNodes(redis.client, parents, [[node('p1', [kids.job('c1'), kids.job('c2')])]])
    const ref = JSON.stringify({ id: 'p1', queueKey: 'emq:{parents}' })
    await addFlowNodes(redis.client, kids, [[node('c1', [], parents.job('p1'), ref)]])
    expect(await redis.client.zrange(parents.adding, '0', '-1')).toEqual(['p1'])
    const failed: string[] = []
    const w = fx.worker('parents', () => 'ran')
    w.on('failed', (job) => failed.push(`${job?.id}: ${job?.failedReason}`))
    fx.worker('kids', () => 'ok')
    // Within the grace nothing happens; past it (0 here) the sweep of the parent's queue fails the missing child.
    await sweep(redis.url, 'parents', { graceMs: 60_000 })
    expect(await fx.queue('parents').getJobState('p1')).toBe('waiting-children')
    await sweep(redis.url, 'parents', { graceMs: 0 })
    await waitFor(() => failed.length === 1, { what: 'the parent failed' })
    expect(failed).toEqual([`p1: child ${kids.job('c2')} failed`])
    expect(await redis.client.zcard(parents.adding)).toBe(0)
    // A flow a producer finished leaves nothing in `adding`.
    await fx.producer().add({ name: 'p', queueName: 'parents', children: [{ name: 'c', queueName: 'kids' }] })
    expect(await redis.client.zcard(parents.adding)).toBe(0)
  })

  it('120 children ended by dead workers, their entries delivered by eight sweeps at once: each parent moves on once', async () => {
    const flows = await fx.producer().addBulk(
      Array.from({ length: 40 }, (_, i) => ({
        name: `p${i}`,
        queueName: 'parents',
        children: Array.from({ length: 3 }, (_, j) => ({ name: `c${j}`, queueName: 'kids' })),
      })),
    )
    const childIds = flows.flatMap((f) => (f.children ?? []).map((c) => c.job.id))
    // Workers that end every child and die before telling a parent: the finishes alone, no delivery.
    for (let i = 0; i < childIds.length; i += 20) {
      const ids = childIds.slice(i, i + 20)
      const { taken } = await take(redis.client, kids, { workerToken: `dead${i}`, leaseMs: 5_000, workerName: 'dead' }, ids)
      expect(taken).toHaveLength(ids.length)
      const reply = await finishRuns(
        redis.client,
        kids,
        taken.map((t) => ({ run: { id: t.job.id, token: t.token }, action: 'complete' as const, value: '1' })),
      )
      expect(reply.runs.every((r) => r.handoff !== undefined)).toBe(true)
    }
    const parents = queueKeys('emq', 'parents')
    expect(await redis.client.zcard(parents.waitingChildren)).toBe(40)
    // The outbox holds 120 entries; each sweep delivers a page, eight of them side by side, until none is left.
    for (let round = 0; round < 20 && (await redis.client.hlen(kids.handoffs)) > 0; round++)
      await Promise.all(Array.from({ length: 8 }, () => sweep(redis.url, 'kids')))
    expect(await redis.client.hlen(kids.handoffs)).toBe(0)
    const waiting = await redis.client.lrange(parents.wait, 0, -1)
    expect(waiting.sort()).toEqual(flows.map((f) => f.job.id).sort())
    expect(await redis.client.zcard(parents.waitingChildren)).toBe(0)
  })

  it('parents whose last children end while sweeps of the child queue overlap: each runs once, none early', async () => {
    const producer = fx.producer()
    const flows = await producer.addBulk(
      Array.from({ length: 40 }, (_, i) => ({
        name: `p${i}`,
        queueName: 'parents',
        children: Array.from({ length: 3 }, (_, j) => ({ name: `c${j}`, queueName: 'kids', data: { j } })),
      })),
    )
    const parents = fx.queue('parents')
    const early: string[] = []
    const runs = new Map<string, number>()
    fx.worker(
      'parents',
      async (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
        const counts = await job.getDependenciesCount()
        if (counts.unprocessed !== 0 || counts.processed !== 3) early.push(job.id)
      },
      { concurrency: 4 },
    )
    fx.worker('kids', (job) => (job.data as { j: number }).j, { concurrency: 8 })
    let sweeping = true
    const sweeper = async () => {
      while (sweeping) await sweep(redis.url, 'kids', { graceMs: 0 })
    }
    const sweepers = [sweeper(), sweeper(), sweeper()]
    try {
      await waitFor(async () => (await parents.getCompletedCount()) === flows.length, { timeoutMs: 30_000, what: 'every parent completed' })
    } finally {
      sweeping = false
      await Promise.all(sweepers)
    }
    expect(early).toEqual([])
    expect(runs.size).toBe(flows.length)
    expect([...runs.values()].every((n) => n === 1)).toBe(true)
    expect(await redis.client.hlen(kids.handoffs)).toBe(0)
  })
})
