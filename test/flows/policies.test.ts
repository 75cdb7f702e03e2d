/**
 * What a child's failure does to its parent, BullMQ 6.7's four policies and its default: without one the
 * parent keeps waiting; failParentOnFailure fails the parent (unrun, "child <key> failed") and so on up a
 * chain of such parents; continueParentOnFailure runs it at once; ignoreDependencyOnFailure and
 * removeDependencyOnFailure let it run after its other children, recording (or not) the failure.
 */
import { describe, expect, it } from 'vitest'
import { UnrecoverableError } from '../../lib/index.js'
import { useFlows } from '../helpers/flows.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useFlows(redis)

/** A parent in `parents` with a child that fails and one that succeeds, in `kids`; the failing one has `opts`. */
async function family(opts: Record<string, boolean | number>) {
  const flow = await fx.producer().add({
    name: 'parent',
    queueName: 'parents',
    children: [
      { name: 'bad', queueName: 'kids', opts },
      { name: 'good', queueName: 'kids' },
    ],
  })
  const [bad, good] = (flow.children ?? []).map((c) => c.job)
  return { parentId: flow.job.id, badKey: `emq:{kids}:${bad?.id}`, goodKey: `emq:{kids}:${good?.id}` }
}

function runKids() {
  fx.worker('kids', (job) => {
    if (job.name === 'bad') throw new UnrecoverableError('boom')
    return 'ok'
  })
}

describe('a failed child', () => {
  it('with no policy leaves its parent waiting, the failure pending among its dependencies', async () => {
    const { parentId, badKey } = await family({})
    runKids()
    const kids = fx.queue('kids')
    await waitFor(async () => (await kids.getJobCounts('failed', 'completed')).failed === 1 && (await kids.getCompletedCount()) === 1)
    const parents = fx.queue('parents')
    const parent = await parents.getJob(parentId)
    expect(await parent?.getState()).toBe('waiting-children')
    expect((await parent?.getDependencies())?.unprocessed).toEqual([badKey])
    expect(await redis.client.hlen('emq:{kids}:handoffs')).toBe(0)
  })

  it('with failParentOnFailure fails the parent without running it, and its own parent the same way', async () => {
    const flow = await fx.producer().add({
      name: 'top',
      queueName: 'parents',
      children: [
        {
          name: 'middle',
          queueName: 'parents',
          opts: { failParentOnFailure: true },
          children: [{ name: 'bad', queueName: 'kids', opts: { failParentOnFailure: true } }],
        },
      ],
    })
    const middle = flow.children?.[0]?.job
    const bad = flow.children?.[0]?.children?.[0]?.job
    runKids()
    const ran: string[] = []
    const failed: string[] = []
    const w = fx.worker('parents', (job) => {
      ran.push(job.name)
    })
    w.on('failed', (job, err) => failed.push(`${job?.name}: ${(err as Error).message}`))
    const parents = fx.queue('parents')
    await waitFor(async () => failed.length === 2 && (await parents.getJobState(flow.job.id)) === 'failed', { what: 'the top failed' })
    expect(ran).toEqual([])
    expect(failed).toEqual([`middle: child emq:{kids}:${bad?.id} failed`, `top: child emq:{parents}:${middle?.id} failed`])
    const m = await parents.getJob(middle?.id as string)
    expect(m?.failedReason).toBe(`child emq:{kids}:${bad?.id} failed`)
    expect((await m?.getDependencies())?.failed).toEqual([`emq:{kids}:${bad?.id}`])
    expect(await m?.getDependenciesCount({ failed: true })).toEqual({ failed: 1 })
  })

  it('with continueParentOnFailure runs the parent at once, the failure among its ignored ones', async () => {
    const { parentId, badKey, goodKey } = await family({ continueParentOnFailure: true })
    // The good child runs until the parent has run: the parent does not wait for it.
    let parentRan: () => void = () => undefined
    const ran = new Promise<void>((resolve) => {
      parentRan = resolve
    })
    fx.worker(
      'kids',
      async (job) => {
        if (job.name === 'bad') throw new Error('boom')
        await ran
        return 'ok'
      },
      { concurrency: 2 },
    )
    const seen: unknown[] = []
    fx.worker('parents', async (job) => {
      seen.push(await job.getIgnoredChildrenFailures(), (await job.getDependencies()).unprocessed)
      parentRan()
    })
    await waitFor(async () => (await fx.queue('parents').getJobState(parentId)) === 'completed', { what: 'the parent completed' })
    expect(seen).toEqual([{ [badKey]: 'boom' }, [goodKey]])
  })

  it('with ignoreDependencyOnFailure runs the parent after its other children, the failure recorded', async () => {
    const { parentId, badKey, goodKey } = await family({ ignoreDependencyOnFailure: true })
    runKids()
    const seen: unknown[] = []
    fx.worker('parents', async (job) => {
      seen.push([await job.getChildrenValues(), await job.getFailedChildrenValues()])
    })
    await waitFor(async () => (await fx.queue('parents').getJobState(parentId)) === 'completed', { what: 'the parent completed' })
    expect(seen).toEqual([[{ [goodKey]: 'ok' }, { [badKey]: 'boom' }]])
  })

  it('with removeDependencyOnFailure runs the parent after its other children, the failure forgotten', async () => {
    const { parentId, goodKey } = await family({ removeDependencyOnFailure: true })
    runKids()
    fx.worker('parents', () => 'done')
    await waitFor(async () => (await fx.queue('parents').getJobState(parentId)) === 'completed', { what: 'the parent completed' })
    const parent = await fx.queue('parents').getJob(parentId)
    expect(await parent?.getDependencies()).toEqual({ processed: { [goodKey]: 'ok' }, unprocessed: [], ignored: {}, failed: [] })
  })

  it('uses its attempts first: only the last failure tells the parent', async () => {
    const { parentId, badKey } = await family({ ignoreDependencyOnFailure: true, attempts: 3 })
    let runs = 0
    const statesSeen: string[] = []
    const parents = fx.queue('parents')
    fx.worker('kids', async (job) => {
      if (job.name !== 'bad') return 'ok'
      runs++
      statesSeen.push(await parents.getJobState(parentId))
      throw new Error(`boom ${runs}`)
    })
    fx.worker('parents', () => 'done')
    await waitFor(async () => (await parents.getJobState(parentId)) === 'completed', { what: 'the parent completed' })
    expect(runs).toBe(3)
    expect(statesSeen).toEqual(['waiting-children', 'waiting-children', 'waiting-children'])
    expect(await (await parents.getJob(parentId))?.getIgnoredChildrenFailures()).toEqual({ [badKey]: 'boom 3' })
  })

  it('with no policy but removed as it fails (removeOnFail), leaves the dependencies: the parent runs after its other children', async () => {
    const { parentId, goodKey } = await family({ removeOnFail: true })
    runKids()
    fx.worker('parents', () => 'done')
    const parents = fx.queue('parents')
    await waitFor(async () => (await parents.getJobState(parentId)) === 'completed', { what: 'the parent completed' })
    const parent = await parents.getJob(parentId)
    expect(await parent?.getDependencies()).toEqual({ processed: { [goodKey]: 'ok' }, unprocessed: [], ignored: {}, failed: [] })
    expect(await fx.queue('kids').getJobCounts('failed')).toEqual({ failed: 0 })
  })

  it("with no policy, removed as it fails by the worker's removeOnFail, lets the parent run the same way", async () => {
    const { parentId } = await family({})
    fx.worker(
      'kids',
      (job) => {
        if (job.name === 'bad') throw new UnrecoverableError('boom')
        return 'ok'
      },
      { removeOnFail: true },
    )
    fx.worker('parents', () => 'done')
    await waitFor(async () => (await fx.queue('parents').getJobState(parentId)) === 'completed', { what: 'the parent completed' })
  })

  it('with no policy and kept when it fails (removeOnFail: 1), keeps its parent waiting', async () => {
    const { parentId, badKey } = await family({ removeOnFail: 1 })
    runKids()
    const kids = fx.queue('kids')
    await waitFor(async () => (await kids.getFailedCount()) === 1 && (await kids.getCompletedCount()) === 1, { what: 'both ended' })
    const parent = await fx.queue('parents').getJob(parentId)
    expect(await parent?.getState()).toBe('waiting-children')
    expect((await parent?.getDependencies())?.unprocessed).toEqual([badKey])
  })
})
