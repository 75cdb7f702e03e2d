/**
 * What a BullMQ user reaches for besides the queue's own calls: a job's remove(), retry(), promote(),
 * getState() and isX(), queue.getJobState(), waitUntilReady() on a Queue and a Worker, a Worker's
 * pause()/resume()/isPaused()/isRunning(), and its ready, drained, paused, resumed, closing and closed
 * events, with BullMQ's names; the job counts as BullMQ 6.7 gives them.
 */
import { describe, expect, it } from 'vitest'
import { type EchoMQError, type Job, Queue, sweep } from '../../lib/index.js'
import { take } from '../../lib/redis/commands.js'
import { useQueue } from '../helpers/fixture.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

const codeOf = async (promise: Promise<unknown>) => ((await promise.catch((e: unknown) => e)) as EchoMQError).code

describe("a job's own methods", () => {
  it('getState and queue.getJobState name every state as BullMQ does; a job gone is unknown', async () => {
    await fx.queue.add('x', {}, { jobId: 'w' })
    await fx.queue.add('x', {}, { jobId: 'p', priority: 2 })
    await fx.queue.add('x', {}, { jobId: 'd', delay: 60_000 })
    const states = await Promise.all(['w', 'p', 'd', 'nope'].map((id) => fx.queue.getJobState(id)))
    expect(states).toEqual(['waiting', 'prioritized', 'delayed', 'unknown'])
    const job = (await fx.queue.getJob('d')) as Job
    expect(await job.getState()).toBe('delayed')
    expect(await job.isDelayed()).toBe(true)
    expect(await job.isWaiting()).toBe(false)
  })

  it('a processor sees its job active; the job it was given completes, fails, and is retried through its own methods', async () => {
    const seen: string[] = []
    fx.worker(async (job: Job) => {
      seen.push(await job.getState())
      if ((job.data as { fail?: boolean }).fail) throw new Error('no')
      return 'ok'
    })
    const ok = await fx.queue.add('x', {}, { jobId: 'ok' })
    const bad = await fx.queue.add('x', { fail: true }, { jobId: 'bad', attempts: 1 })
    await waitFor(async () => (await bad.isFailed()) && (await ok.isCompleted()), { what: 'one completed, one failed' })
    expect(seen).toEqual(['active', 'active'])
    expect(await codeOf(ok.retry('failed'))).toBe('ERR_JOB_STATE')
    await ok.retry('completed')
    expect(ok.state).toBe('wait')
    await bad.retry()
    expect(bad.state).toBe('wait')
    await waitFor(async () => (await fx.queue.getJobState('bad')) === 'failed', { what: 'the retried job to fail again' })
    expect((await fx.queue.getJob('bad'))?.attemptsStarted).toBe(2)
    const again = async () => fx.queue.getJob('ok')
    await waitFor(async () => (await again())?.state === 'completed', { what: 'the retried completed job to complete again' })
    expect(await again()).toMatchObject({ state: 'completed', attemptsMade: 2, attemptsStarted: 2, returnValue: 'ok' })
  })

  it('promote() runs a delayed job now; remove() removes it, and refuses one in flight', async () => {
    const later = await fx.queue.add('x', {}, { jobId: 'later', delay: 3_600_000 })
    await later.promote()
    expect(await later.getState()).toBe('waiting')
    await later.remove()
    expect(await later.getState()).toBe('unknown')
    let release: () => void = () => undefined
    const w = fx.worker(() => new Promise<void>((resolve) => (release = resolve)))
    const running = nextEvent<[Job]>(w, 'active')
    await fx.queue.add('x', {}, { jobId: 'busy' })
    const [job] = await running
    expect(await codeOf(job.remove())).toBe('ERR_JOB_ACTIVE')
    release()
  })

  it('retryJobs of a job that does not exist says so (ERR_JOB_MISSING), as promoteJob does', async () => {
    expect(await codeOf(fx.queue.retryJobs({ ids: ['nope'] }))).toBe('ERR_JOB_MISSING')
    expect(await codeOf(fx.queue.promoteJob('nope'))).toBe('ERR_JOB_MISSING')
  })
})

describe('job counts', () => {
  /** Ten jobs, one or two in each state: a reserved prioritized job and marked-stalled ones too. */
  async function everyState(): Promise<void> {
    const w = fx.worker((job: Job) => {
      if (job.id === 'f1') throw new Error('no')
    })
    await fx.queue.add('x', {}, { jobId: 'c1' })
    await fx.queue.add('x', {}, { jobId: 'f1', attempts: 1 })
    await waitFor(async () => (await fx.queue.getJobState('f1')) === 'failed' && (await fx.queue.getJobState('c1')) === 'completed', {
      what: 'one completed, one failed',
    })
    await w.close()
    // Two jobs of a dead worker, marked by a sweep (recovered only after the grace).
    await crashedJobs(redis.client, 'q', 2)
    expect((await sweep(redis.client, 'q', { graceMs: 60_000 })).marked).toHaveLength(2)
    await fx.queue.add('x', {}, { jobId: 'run' })
    await take(redis.client, fx.keys, { workerToken: 'w', leaseMs: 60_000, workerName: 'test' }, ['run'])
    for (const id of ['w1', 'w2']) await fx.queue.add('x', {}, { jobId: id })
    for (const id of ['p1', 'p2']) await fx.queue.add('x', {}, { jobId: id, priority: 1 })
    await fx.queue.add('x', {}, { jobId: 'd1', delay: 60_000 })
    // p2 reserved by a busy worker, as takeJobs.lua reserves it (its score kept to hand it back).
    const [, score] = await redis.client.zpopmax(fx.keys.prioritized)
    const [seconds] = await redis.client.time()
    await redis.client.hset(fx.keys.reservedScores, 'p2', score as string)
    await redis.client.zadd(fx.keys.reserved, Number(seconds) * 1000 + 60_000, 'p2')
  }

  it("getJobCounts and the getters count as BullMQ 6.7, paused or not: a paused queue's jobs are waiting", async () => {
    await everyState()
    const counts = {
      active: 3,
      completed: 1,
      delayed: 1,
      failed: 1,
      prioritized: 2,
      waiting: 2,
      'waiting-children': 0,
    }
    for (const paused of [false, true]) {
      if (paused) await fx.queue.pause()
      expect(await fx.queue.getJobCounts()).toEqual(counts)
      expect(await fx.queue.getJobCounts('wait', 'paused', 'prioritized')).toEqual({ wait: 2, paused: 0, prioritized: 2 })
      expect(await fx.queue.getJobCountByTypes('waiting', 'prioritized')).toBe(4)
      expect(await fx.queue.getJobCountByTypes()).toBe(10)
      expect(await fx.queue.getWaitingCount()).toBe(2)
      expect(await fx.queue.getPrioritizedCount()).toBe(2)
      expect(await fx.queue.getActiveCount()).toBe(3)
      expect(await fx.queue.getWaitingChildrenCount()).toBe(0)
      // BullMQ 6.7's count(): waiting, delayed, prioritized and waiting-children.
      expect(await fx.queue.count()).toBe(5)
    }
  })

  it('counts() counts each job once: its fields add up to every job of the queue', async () => {
    await everyState()
    const counts = await fx.queue.counts()
    expect(counts).toEqual({ wait: 2, prioritized: 2, active: 1, stalled: 2, delayed: 1, completed: 1, failed: 1 })
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(10)
  })
})

describe('readiness', () => {
  it('waitUntilReady resolves to the client once Redis answers, on a Queue and a Worker; the worker says ready', async () => {
    // direct: a Queue on a URL, made here, whose own connection's readiness is under test
    const queue = new Queue('q', { connection: redis.url })
    try {
      expect(await (await queue.waitUntilReady()).ping()).toBe('PONG')
    } finally {
      await queue.close()
    }
    const w = fx.worker(() => 'ok')
    const ready = nextEvent(w, 'ready') // attached before the connection can be up: it opens on a later tick
    expect(await (await w.waitUntilReady()).ping()).toBe('PONG')
    await ready
  })
})

describe("a worker's own pause", () => {
  it('pause() lets the running job finish, then emits paused, and takes nothing more until resume(); other workers go on', async () => {
    let release: () => void = () => undefined
    const ran: string[] = []
    const w = fx.worker((job: Job) => {
      ran.push(job.id)
      return job.id === 'first' ? new Promise<void>((resolve) => (release = resolve)) : undefined
    })
    const started = nextEvent(w, 'active')
    await fx.queue.add('x', {}, { jobId: 'first' })
    await started
    const paused = nextEvent(w, 'paused')
    let done = false
    let heard = false
    void paused.then(() => (heard = true))
    const pausing = w.pause().then(() => (done = true))
    expect(w.isPaused()).toBe(true)
    // Its job still runs: the run goes on (isRunning), and `paused` waits for it, as BullMQ's.
    expect(w.isRunning()).toBe(true)
    await fx.queue.add('x', {}, { jobId: 'second' })
    expect([done, heard]).toEqual([false, false])
    release()
    await pausing
    await paused
    expect(w.isRunning()).toBe(false)
    expect(await fx.queue.getJobState('first')).toBe('completed')
    expect(await fx.queue.getJobState('second')).toBe('waiting')
    // Another worker of the queue takes it meanwhile: the pause was this worker's only.
    const other = fx.worker((job: Job) => void ran.push(`other:${job.id}`))
    await waitFor(async () => (await fx.queue.getJobState('second')) === 'completed', { what: 'the other worker to run it' })
    await other.close()
    const resumed = nextEvent(w, 'resumed')
    w.resume()
    await resumed
    await fx.queue.add('x', {}, { jobId: 'third' })
    await waitFor(async () => (await fx.queue.getJobState('third')) === 'completed', { what: 'the resumed worker to run it' })
    expect(ran).toEqual(['first', 'other:second', 'third'])
  })

  it('drained when the queue ran dry; closing, then closed', async () => {
    const w = fx.worker(() => 'ok')
    const drained = nextEvent(w, 'drained')
    await fx.queue.addBulk([1, 2, 3].map((i) => ({ name: 'x', data: { i } })))
    await drained
    expect((await fx.queue.counts()).completed).toBe(3)
    const events: string[] = []
    w.on('closing', () => events.push('closing'))
    w.on('closed', () => events.push('closed'))
    await w.close()
    expect(events).toEqual(['closing', 'closed'])
  })
})
