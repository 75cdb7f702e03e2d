/**
 * Retrying a completed job (BullMQ 6.7's job.retry('completed') and retryJobs({ state: 'completed' })): it
 * runs again and completes again, left meanwhile as BullMQ leaves it; what EchoMQ keeps beside BullMQ
 * stays consistent (its place in `completed`, the per-minute counts, its deduplication id, its flow), and
 * what may not be retried is refused with nothing changed. Every script runs under the key guard.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { EchoMQError, type Job, QueueEvents } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useFlows } from '../helpers/flows.js'
import { useKeyGuard } from '../helpers/key-guard.js'
import { useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'
import { waitFor } from '../helpers/wait.js'

useKeyGuard()
const redis = useRedis()
const fx = useQueue(redis, {
  workers: { lockDuration: 1_000, closeTimeout: 2_000 },
  onError: (err) => {
    throw err
  },
})
const flows = useFlows(redis)
const listeners: QueueEvents[] = []
afterEach(async () => {
  await Promise.all(listeners.splice(0).map((l) => l.close()))
})

/** Runs the queue's jobs until `ids` are completed, with a worker closed after: nothing runs a retried job until a test says. */
async function complete(ids: string[], processor: (job: Job) => unknown = (job) => `run ${job.attemptsStarted}`): Promise<void> {
  const w = fx.worker(processor)
  await waitFor(async () => (await Promise.all(ids.map((id) => fx.queue.getJobState(id)))).every((s) => s === 'completed'), {
    what: `${ids.join(', ')} completed`,
  })
  await w.close()
}

const completedAgain = (id: string, starts = 2) =>
  waitFor(
    async () => {
      const job = await fx.queue.getJob(id)
      return job?.state === 'completed' && job.attemptsStarted === starts && job
    },
    { what: `${id} completed again` },
  )

async function refusal(call: Promise<unknown>): Promise<EchoMQError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(EchoMQError)
  return err as EchoMQError
}

describe('job.retry("completed")', () => {
  it('runs the job again: meanwhile it waits as BullMQ leaves it, then completes again with attemptsMade 2', async () => {
    const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
    listeners.push(events)
    await events.waitUntilReady()
    const heard: { jobId: string; prev?: string }[] = []
    events.on('waiting', (args) => heard.push(args))
    await fx.queue.add('x', { n: 1 }, { jobId: 'a' })
    await complete(['a'])
    const job = (await fx.queue.getJob('a')) as Job
    expect(job).toMatchObject({ state: 'completed', returnValue: 'run 1', attemptsMade: 1, attemptsStarted: 1 })

    await job.retry('completed')

    // The Job object as BullMQ's retry leaves it.
    expect([job.state, job.returnvalue, job.finishedOn, job.processedOn, job.failedReason]).toEqual(['wait', null, null, null, null])
    expect(job.attemptsMade).toBe(1)
    const stored = (await fx.queue.getJob('a')) as Job
    expect(stored).toMatchObject({ state: 'wait', attemptsMade: 1, attemptsStarted: 1, retried: 1, data: { n: 1 } })
    expect([stored.returnvalue, stored.finishedOn, stored.processedOn]).toEqual([null, undefined, undefined])
    expect(await fx.queue.getJobState('a')).toBe('waiting')
    expect(await fx.queue.getJobCounts('completed', 'wait')).toEqual({ completed: 0, wait: 1 })
    await waitFor(() => heard.find((e) => e.jobId === 'a' && e.prev === 'completed'), { what: 'waiting, prev completed' })

    await complete(['a'])
    expect(await completedAgain('a')).toMatchObject({ returnValue: 'run 2', attemptsMade: 2, attemptsStarted: 2 })
    expect(await fx.queue.getJobCounts('completed')).toEqual({ completed: 1 })
    // The per-minute counts keep the first completion: it happened.
    expect((await fx.queue.getMetrics('completed')).meta.count).toBe(2)
  })

  it('resetAttemptsMade starts the attempts again; resetAttemptsStarted is refused (ERR_OPTIONS) with nothing changed', async () => {
    await fx.queue.add('x', {}, { jobId: 'a', attempts: 3 })
    await complete(['a'])
    const job = (await fx.queue.getJob('a')) as Job
    const before = await snapshot(redis.client)
    const err = await refusal(job.retry('completed', { resetAttemptsMade: true, resetAttemptsStarted: true }))
    expect(err.code).toBe('ERR_OPTIONS')
    expect(await snapshot(redis.client)).toEqual(before)

    await job.retry('completed', { resetAttemptsMade: true })
    expect(job.attemptsMade).toBe(0)
    expect(await fx.queue.getJob('a')).toMatchObject({ state: 'wait', attemptsMade: 0, attemptsStarted: 1 })
    await complete(['a'])
    expect(await completedAgain('a')).toMatchObject({ attemptsMade: 1, attemptsStarted: 2 })
  })

  it('a job not completed is refused with nothing changed: waiting, failed, missing, and ids of which one is not completed', async () => {
    await fx.queue.add('x', {}, { jobId: 'done' })
    await fx.queue.add('x', { fail: true }, { jobId: 'bad' })
    await complete(['done'], (job) => {
      if (job.data.fail) throw new Error('no')
    })
    await waitFor(async () => (await fx.queue.getJobState('bad')) === 'failed', { what: 'bad failed' })
    await fx.queue.add('x', {}, { jobId: 'waiting' })
    const before = await snapshot(redis.client)

    const waiting = await refusal(((await fx.queue.getJob('waiting')) as Job).retry('completed'))
    expect([waiting.code, waiting.message]).toEqual(['ERR_JOB_STATE', 'job waiting of queue q is wait, not completed; nothing was retried'])
    const failed = await refusal(((await fx.queue.getJob('bad')) as Job).retry('completed'))
    expect([failed.code, failed.message]).toEqual(['ERR_JOB_STATE', 'job bad of queue q is failed, not completed; nothing was retried'])
    const both = await refusal(fx.queue.retryJobs({ ids: ['done', 'waiting'], state: 'completed' }))
    expect(both.code).toBe('ERR_JOB_STATE')
    const missing = await refusal(fx.queue.retryJobs({ ids: ['ghost'], state: 'completed' }))
    expect([missing.code, missing.message]).toEqual(['ERR_JOB_MISSING', 'job ghost of queue q does not exist; nothing was retried'])
    // A completed job is not failed either.
    expect((await refusal(((await fx.queue.getJob('done')) as Job).retry('failed'))).code).toBe('ERR_JOB_STATE')
    // Bad input, before any call.
    expect((await refusal(((await fx.queue.getJob('done')) as Job).retry('active' as never))).code).toBe('ERR_OPTIONS')
    expect((await refusal(fx.queue.retryJobs({ state: 'active' } as never))).code).toBe('ERR_OPTIONS')
    const many = Array.from({ length: 501 }, (_, i) => `j${i}`)
    expect((await refusal(fx.queue.retryJobs({ ids: many, state: 'completed' }))).code).toBe('ERR_OPTIONS')
    expect(await snapshot(redis.client)).toEqual(before)
  })

  it('goes to the back of `wait`, or with a priority to `prioritized` behind its equals', async () => {
    await fx.queue.add('x', {}, { jobId: 'a' })
    await fx.queue.add('x', {}, { jobId: 'p', priority: 5 })
    await complete(['a', 'p'])
    await fx.queue.add('x', {}, { jobId: 'first' })
    await fx.queue.add('x', {}, { jobId: 'q', priority: 5 })
    await fx.queue.retryJobs({ ids: ['a', 'p'], state: 'completed' })
    expect(await fx.queue.getJobState('p')).toBe('prioritized')
    expect(await fx.queue.getJobCounts('wait', 'prioritized')).toEqual({ wait: 2, prioritized: 2 })
    const order: string[] = []
    await complete(['a', 'p', 'first', 'q'], (job) => {
      order.push(job.id)
    })
    // Jobs without a priority run first; then those of priority 5, in the order they joined.
    expect(order).toEqual(['first', 'a', 'q', 'p'])
    expect(await fx.queue.getJob('p')).toMatchObject({ state: 'completed', priority: 5, attemptsMade: 2 })
  })

  it('on a paused queue the job waits (BullMQ: getWaitingCount 1) and runs once the queue resumes', async () => {
    await fx.queue.add('x', {}, { jobId: 'a' })
    await complete(['a'])
    await fx.queue.pause()
    await ((await fx.queue.getJob('a')) as Job).retry('completed')
    expect(await fx.queue.getWaitingCount()).toBe(1)
    expect(await fx.queue.getJobState('a')).toBe('waiting')
    const w = fx.worker(() => 'again')
    await fx.queue.resume()
    expect(await completedAgain('a')).toMatchObject({ returnValue: 'again' })
    await w.close()
  })
})

describe('retryJobs({ state: "completed" })', () => {
  it('retries every completed job finished by `timestamp` (all of them, whatever `count`), oldest first; `limit` bounds them', async () => {
    for (const id of ['a', 'b', 'c', 'd']) {
      await fx.queue.add('x', {}, { jobId: id })
      await complete([id])
    }
    const finished = await Promise.all(['a', 'b', 'c', 'd'].map(async (id) => (await fx.queue.getJob(id))?.finishedOn as number))
    const cut = finished[1] as number
    const moved = await fx.queue.retryJobs({ state: 'completed', count: 1, timestamp: cut })
    const expected = ['a', 'b', 'c', 'd'].filter((_, i) => (finished[i] as number) <= cut)
    expect(moved).toEqual(expected)
    expect(await fx.queue.getJobCounts('completed')).toEqual({ completed: 4 - expected.length })
    expect(await fx.queue.retryJobs({ state: 'completed', limit: 1 })).toHaveLength(1)
    expect(await fx.queue.retryJobs({ state: 'completed' })).toHaveLength(3 - expected.length)
    expect(await fx.queue.retryJobs({ state: 'completed' })).toEqual([])
    await complete(['a', 'b', 'c', 'd'])
    expect(await fx.queue.getJobCounts('completed', 'wait')).toEqual({ completed: 4, wait: 0 })
  })

  it('walks past the jobs it may not retry, batch after batch: the others all go, those stay completed', async () => {
    const ids = Array.from({ length: 130 }, (_, i) => `j${i}`)
    await fx.queue.addBulk(ids.map((id, i) => ({ name: 'x', data: {}, opts: { jobId: id, deduplication: { id: `d${i}` } } })))
    await complete(ids)
    // Other jobs now hold five of their deduplication ids (waiting: no worker runs).
    const held = [0, 1, 99, 100, 129]
    for (const i of held) await fx.queue.add('x', {}, { jobId: `holder${i}`, deduplication: { id: `d${i}` } })
    const moved = await fx.queue.retryJobs({ state: 'completed' })
    expect(moved).toHaveLength(125)
    expect(new Set(moved)).toEqual(new Set(ids.filter((_, i) => !held.includes(i))))
    expect((await fx.queue.getJobs(['completed'])).map((j) => j.id).sort()).toEqual(held.map((i) => `j${i}`).sort())
  })
})

describe('deduplication', () => {
  it('a retried job holds its deduplication id again until it completes: an add of that id meanwhile adds nothing', async () => {
    await fx.queue.add('x', {}, { jobId: 'a', deduplication: { id: 'd' } })
    await complete(['a'])
    expect(await fx.queue.getDeduplicationJobId('d')).toBeNull()
    await ((await fx.queue.getJob('a')) as Job).retry('completed')
    expect(await fx.queue.getDeduplicationJobId('d')).toBe('a')
    expect((await fx.queue.add('x', {}, { jobId: 'b', deduplication: { id: 'd' } })).id).toBe('a')
    expect(await fx.queue.getJob('b')).toBeUndefined()
    await complete(['a'])
    expect(await fx.queue.getDeduplicationJobId('d')).toBeNull()
  })

  it('is refused, nothing changed, while another job holds its id; retryJobs leaves it, and retries one whose ttl hold is its own', async () => {
    await fx.queue.add('x', {}, { jobId: 'a', deduplication: { id: 'd' } })
    await fx.queue.add('x', {}, { jobId: 't', deduplication: { id: 'e', ttl: 60_000 } })
    await complete(['a', 't'])
    await fx.queue.add('x', {}, { jobId: 'b', deduplication: { id: 'd' } })
    const before = await snapshot(redis.client)
    const err = await refusal(((await fx.queue.getJob('a')) as Job).retry('completed'))
    expect(err.code).toBe('ERR_JOB_STATE')
    expect(err.message).toContain('job a of queue q: its deduplication id "d" is held by job b')
    expect(await snapshot(redis.client)).toEqual(before)
    expect(await fx.queue.retryJobs({ state: 'completed' })).toEqual(['t'])
    expect(await fx.queue.getJobState('a')).toBe('completed')
    // t's hold with a ttl is still its own: left to run out as it would have, no hold without one added.
    expect(await fx.queue.getDeduplicationJobId('e')).toBe('t')
    expect(await redis.client.hget(fx.keys.meta, 'de:e')).toBeNull()
  })

  it('a hold with a ttl of another job refuses it too; a hold its drained job gave up is taken', async () => {
    await fx.queue.add('x', {}, { jobId: 'a', deduplication: { id: 'd' } })
    await fx.queue.add('x', {}, { jobId: 'k', deduplication: { id: 'e' } })
    await complete(['a', 'k'])
    await fx.queue.add('x', {}, { jobId: 'ttl', deduplication: { id: 'e', ttl: 60_000 } })
    const before = await snapshot(redis.client)
    const err = await refusal(fx.queue.retryJobs({ ids: ['k'], state: 'completed' }))
    expect(err.message).toContain('its deduplication id "e" is held by job ttl')
    expect(await snapshot(redis.client)).toEqual(before)

    await fx.queue.add('x', {}, { jobId: 'b', deduplication: { id: 'd' } })
    await fx.queue.drain()
    // drain releases the ids its jobs held, as remove does.
    expect(await redis.client.hget(fx.keys.meta, 'de:d')).toBeNull()
    expect(await fx.queue.getDeduplicationJobId('d')).toBeNull()
    await fx.queue.retryJobs({ ids: ['a'], state: 'completed' })
    expect(await fx.queue.getDeduplicationJobId('d')).toBe('a')
  })
})

describe('flows', () => {
  /** A parent in `parents` over one child in each of `queues` (child ids c0, c1, ...); no worker runs. */
  async function tree(queues: string[]) {
    const flow = await flows.producer().add({
      name: 'parent',
      queueName: 'parents',
      data: {},
      opts: { jobId: 'p' },
      children: queues.map((queueName, i) => ({ name: 'child', queueName, data: { i }, opts: { jobId: `c${i}` } })),
    })
    return flow.job as Job
  }

  it('a completed child whose parent still waits for others is its dependency again, and the parent gets its new result', async () => {
    const parent = await tree(['ca', 'cb'])
    const ca = flows.queue('ca')
    const first = flows.worker('ca', (job) => `v${job.attemptsStarted}`)
    await waitFor(async () => (await ca.getJobState('c0')) === 'completed', { what: 'the first child completed' })
    await first.close()
    expect(await parent.getDependenciesCount()).toMatchObject({ processed: 1, unprocessed: 1 })

    await ((await ca.getJob('c0')) as Job).retry('completed')

    expect(await parent.getDependenciesCount()).toMatchObject({ processed: 0, unprocessed: 2 })
    expect(await flows.queue('parents').getJobState('p')).toBe('waiting-children')
    const values: Record<string, unknown>[] = []
    flows.worker('parents', async (job) => {
      values.push(await job.getChildrenValues())
    })
    flows.worker('ca', (job) => `v${job.attemptsStarted}`)
    flows.worker('cb', () => 'b')
    await waitFor(async () => (await flows.queue('parents').getJobState('p')) === 'completed', { what: 'the parent completed' })
    expect(values).toEqual([{ 'emq:{ca}:c0': 'v2', 'emq:{cb}:c1': 'b' }])
  })

  it('a completed child whose parent moved on is refused with nothing changed; a completed parent is retried and runs again', async () => {
    const parent = await tree(['cc'])
    const cc = flows.queue('cc')
    const parents = flows.queue('parents')
    const children = flows.worker('cc', () => 'child result')
    await waitFor(async () => (await parents.getJobState('p')) === 'waiting', { what: 'the parent released' })
    await children.close()
    const before = await snapshot(redis.client)
    const child = (await cc.getJob('c0')) as Job
    const err = await refusal(child.retry('completed'))
    expect(err.code).toBe('ERR_JOB_STATE')
    expect(err.message).toContain("job c0 of queue cc is a flow's child whose parent emq:{parents}:p is wait")
    expect(await cc.retryJobs({ state: 'completed' })).toEqual([])
    expect(await snapshot(redis.client)).toEqual(before)

    const runs: Record<string, unknown>[] = []
    flows.worker('parents', async (job) => {
      runs.push(await job.getChildrenValues())
      return runs.length
    })
    await waitFor(async () => (await parents.getJobState('p')) === 'completed', { what: 'the parent completed' })
    expect((await refusal(child.retry('completed'))).message).toContain('is completed, no longer waiting for children')
    await parent.retry('completed')
    await waitFor(async () => (await parents.getJob('p'))?.returnValue === 2, { what: 'the parent completed again' })
    expect(runs).toEqual([{ 'emq:{cc}:c0': 'child result' }, { 'emq:{cc}:c0': 'child result' }])
    expect(await parent.getDependenciesCount()).toMatchObject({ processed: 1, unprocessed: 0 })
  })

  it('a completed child whose parent is gone is retried as a job of its own', async () => {
    await tree(['cd'])
    const cd = flows.queue('cd')
    const parents = flows.queue('parents')
    flows.worker('cd', (job) => `run ${job.attemptsStarted}`)
    await waitFor(async () => (await parents.getJobState('p')) === 'waiting', { what: 'the parent released' })
    await parents.remove('p', { removeChildren: false })
    await ((await cd.getJob('c0')) as Job).retry('completed')
    await waitFor(async () => (await cd.getJob('c0'))?.returnValue === 'run 2', { what: 'the child completed again' })
    expect(await parents.getJob('p')).toBeUndefined()
  })
})
