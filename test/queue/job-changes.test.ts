/**
 * Changing a job in place (BullMQ 6.7's names): job.updateData, job.changePriority, job.moveToDelayed with
 * DelayedError, job.changeDelay, job.extendLock, job.clearLogs. Each refused call (no such job, wrong state, a token that does not hold
 * the lease, bad input) throws a typed error and leaves Redis as it was.
 */
import { describe, expect, it } from 'vitest'
import { DelayedError, type EchoMQError, type Job, sweep } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 400, closeTimeout: 500 } })

const codeOf = async (promise: Promise<unknown>) => ((await promise.catch((e: unknown) => e)) as EchoMQError).code

/** Every key of the test's Redis with its content, to show a refused call changed nothing. */
async function snapshot(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  for (const key of (await redis.client.keys('*')).sort()) {
    const type = await redis.client.type(key)
    if (type === 'hash') out[key] = await redis.client.hgetall(key)
    else if (type === 'list') out[key] = await redis.client.lrange(key, 0, -1)
    else if (type === 'zset') out[key] = await redis.client.zrange(key, '0', '-1', 'WITHSCORES')
    else if (type === 'string') out[key] = await redis.client.get(key)
    else out[key] = type
  }
  return out
}

describe('updateData', () => {
  it('replaces the data of a stored job, validated as add validates data', async () => {
    const job = await fx.queue.add('j', { step: 0 }, { jobId: 'a' })
    await job.updateData({ step: 1 })
    expect(job.data).toEqual({ step: 1 })
    expect((await fx.queue.getJob('a'))?.data).toEqual({ step: 1 })

    const before = await snapshot()
    expect(await codeOf(job.updateData(() => 1))).toBe('ERR_JOB_DATA')
    expect(await codeOf(job.updateData('x'.repeat(1024 * 1024 + 1)))).toBe('ERR_JOB_DATA')
    expect(await snapshot()).toEqual(before)

    await job.remove()
    expect(await codeOf(job.updateData({ step: 2 }))).toBe('ERR_JOB_MISSING')
    expect(await redis.client.exists(fx.keys.job('a'))).toBe(0)
  })

  it('a processor checkpoints its data; the retry after a failure sees it', async () => {
    const seen: unknown[] = []
    const w = fx.worker(async (job: Job) => {
      seen.push(job.data)
      if ((job.data as { step: number }).step === 0) {
        await job.updateData({ step: 1 })
        throw new Error('crash after the checkpoint')
      }
      return 'done'
    })
    const completed = nextEvent(w, 'completed')
    await fx.queue.add('j', { step: 0 }, { jobId: 'c', attempts: 2 })
    await completed
    expect(seen).toEqual([{ step: 0 }, { step: 1 }])
  })
})

describe('changePriority', () => {
  it('re-sorts a waiting job: a new priority, lifo to the front of its equals, 0 to wait', async () => {
    await fx.queue.add('j', {}, { jobId: 'p1', priority: 5 })
    await fx.queue.add('j', {}, { jobId: 'p2', priority: 5 })
    const p3 = await fx.queue.add('j', {}, { jobId: 'p3', priority: 5 })
    await p3.changePriority({ priority: 1 })
    expect(p3.priority).toBe(1)
    const order = async () => redis.client.zrange(fx.keys.prioritized, '0', '-1')
    expect(await order()).toEqual(['p3', 'p1', 'p2'])
    const p2 = (await fx.queue.getJob('p2')) as Job
    await p2.changePriority({ priority: 5, lifo: true })
    expect(await order()).toEqual(['p3', 'p2', 'p1'])
    expect((await fx.queue.getJob('p3'))?.priority).toBe(1)

    await p2.changePriority({ priority: 0 })
    expect(await order()).toEqual(['p3', 'p1'])
    expect(await redis.client.lrange(fx.keys.wait, 0, -1)).toEqual(['p2'])
    const stored = await redis.client.hgetall(fx.keys.job('p2'))
    expect(stored.state).toBe('wait')
    expect(stored.priority).toBeUndefined()
    expect(await fx.queue.counts()).toMatchObject({ wait: 1, prioritized: 2 })

    // Back from wait into prioritized.
    await p2.changePriority({ priority: 3 })
    expect(await order()).toEqual(['p3', 'p2', 'p1'])
    expect(await redis.client.llen(fx.keys.wait)).toBe(0)

    // The worker runs them in the new order.
    const ran: string[] = []
    fx.worker((job: Job) => {
      ran.push(job.id)
    })
    await waitFor(async () => ran.length === 3, { what: 'three jobs run' })
    expect(ran).toEqual(['p3', 'p2', 'p1'])
  })

  it('a delayed job keeps its place and runs with the new priority; refusals change nothing', async () => {
    const d = await fx.queue.add('j', {}, { jobId: 'd', delay: 3_600_000 })
    await d.changePriority({ priority: 7 })
    expect(await redis.client.zscore(fx.keys.delayed, 'd')).not.toBeNull()
    await fx.queue.promoteJob('d')
    expect((await fx.queue.getJob('d'))?.state).toBe('prioritized')

    const before = await snapshot()
    expect(await codeOf(d.changePriority({ priority: -1 }))).toBe('ERR_OPTIONS')
    expect(await codeOf(d.changePriority({ priority: 2 ** 21 }))).toBe('ERR_OPTIONS')
    expect(await codeOf(d.changePriority({ priority: 1, lifo: 'yes' as never }))).toBe('ERR_OPTIONS')
    expect(await codeOf(d.changePriority({ priority: 1, front: true } as never))).toBe('ERR_OPTIONS')
    const gone = (await fx.queue.add('j', {}, { jobId: 'gone' })) as Job
    await gone.remove()
    const afterRemove = await snapshot()
    expect(await codeOf(gone.changePriority({ priority: 1 }))).toBe('ERR_JOB_MISSING')
    expect(await snapshot()).toEqual(afterRemove)
    expect(Object.keys(afterRemove).length).toBeGreaterThanOrEqual(Object.keys(before).length - 1)
  })
})

describe('moveToDelayed with DelayedError', () => {
  it('the job goes to delayed without spending an attempt, leaves the lease index, and runs again when due', async () => {
    let runs = 0
    const failed: string[] = []
    const w = fx.worker(async (job: Job) => {
      runs++
      if (runs === 1) {
        expect(job.token).toMatch(/:1$/)
        await job.moveToDelayed(Date.now() + 800, job.token)
        throw new DelayedError()
      }
      return job.attemptsMade
    })
    w.on('failed', (job: Job) => failed.push(job.id))
    const errors: unknown[] = []
    w.on('error', (err) => errors.push(err))
    await fx.queue.add('j', {}, { jobId: 'm', attempts: 1 })
    await waitFor(async () => (await fx.queue.getJob('m'))?.state === 'delayed', { what: 'the job delayed' })
    // Out of flight for good: no lease, no index entry, no stalled mark.
    expect(await redis.client.zscore(fx.keys.active, 'm')).toBeNull()
    expect(await redis.client.exists(fx.keys.lock('m'))).toBe(0)
    expect(await redis.client.zcard(fx.keys.stalled)).toBe(0)
    const delayed = await fx.queue.getJob('m')
    expect(delayed?.attemptsMade).toBe(0)
    // Two sweeps (both phases) find nothing to mark or recover: the job is no longer in flight.
    for (let i = 0; i < 2; i++) expect(await sweep(redis.client, 'q', { graceMs: 0 })).toEqual({ marked: [], recovered: [], failed: [] })

    const completed = await nextEvent<[Job, unknown]>(w, 'completed')
    expect(completed[0].id).toBe('m')
    expect(completed[1]).toBe(0)
    expect(runs).toBe(2)
    expect(failed).toEqual([])
    expect(errors).toEqual([])
    expect((await fx.queue.getJob('m'))?.attemptsStarted).toBe(2)
  })

  it('a token that does not hold the lease, a job not in flight, or bad input: refused, nothing changed', async () => {
    const release: (() => void)[] = []
    const tokens: string[] = []
    const w = fx.worker(
      (job: Job) =>
        new Promise<void>((resolve) => {
          tokens.push(job.token as string)
          release.push(resolve)
        }),
    )
    const active = nextEvent(w, 'active')
    await fx.queue.add('j', {}, { jobId: 'r' })
    await active
    const job = (await fx.queue.getJob('r')) as Job
    const waiting = await fx.queue.add('j', {}, { jobId: 'w' })
    // The heartbeat renews the lease and the index, never the hash: the hash shows what a refusal changed.
    const before = await redis.client.hgetall(fx.keys.job('r'))
    expect(await codeOf(job.moveToDelayed(Date.now() + 1000, 'someone-else:1'))).toBe('ERR_LOCK_LOST')
    expect(await codeOf(waiting.moveToDelayed(Date.now() + 1000, ''))).toBe('ERR_JOB_STATE')
    expect(await codeOf(job.moveToDelayed(Number.NaN, tokens[0]))).toBe('ERR_OPTIONS')
    expect(await codeOf(job.moveToDelayed(-5, tokens[0]))).toBe('ERR_OPTIONS')
    expect(await redis.client.hgetall(fx.keys.job('r'))).toEqual(before)
    expect((await fx.queue.getJob('w'))?.state).toBe('wait')
    expect(await redis.client.zscore(fx.keys.active, 'r')).not.toBeNull()
    release[0]?.()
    await nextEvent(w, 'completed')
    expect(await codeOf(job.moveToDelayed(Date.now() + 1000, tokens[0]))).toBe('ERR_LOCK_LOST')
    expect((await fx.queue.getJob('r'))?.state).toBe('completed')
  })

  it("a BullMQ processor (job, token) passes EchoMQ's signal as the token: the run's token stands in", async () => {
    let runs = 0
    const w = fx.worker(async (job: Job, token: unknown) => {
      runs++
      if (runs > 1) return 'second'
      expect(await job.extendLock(token as string, 5_000)).toBe(1)
      await job.moveToDelayed(Date.now() + 100, token as string)
      throw new DelayedError()
    })
    const completed = nextEvent<[Job, unknown]>(w, 'completed')
    await fx.queue.add('j', {}, { jobId: 'b' })
    expect((await completed)[1]).toBe('second')
    expect(runs).toBe(2)
  })

  it("an operator's unfenced move (a Queue's job, no token) takes the job from its run: the run's finish is refused", async () => {
    const release: (() => void)[] = []
    const w = fx.worker(() => new Promise<void>((resolve) => release.push(resolve)))
    const completed: string[] = []
    w.on('completed', (job: Job) => completed.push(job.id))
    const lost = nextEvent<[Job]>(w, 'lockLost')
    const active = nextEvent(w, 'active')
    await fx.queue.add('j', {}, { jobId: 'o' })
    await active
    const job = (await fx.queue.getJob('o')) as Job
    await job.moveToDelayed(Date.now() + 3_600_000)
    expect(job.state).toBe('delayed')
    expect((await lost)[0].id).toBe('o')
    release[0]?.()
    await w.close()
    expect(completed).toEqual([])
    const stored = await fx.queue.getJob('o')
    expect(stored?.state).toBe('delayed')
    expect(stored?.attemptsStarted).toBe(1)
    expect(stored?.attemptsMade).toBe(0)
  })

  it('a DelayedError without moveToDelayed: back to wait, no attempt used, the worker says why', async () => {
    let runs = 0
    const w = fx.worker(async () => {
      runs++
      if (runs === 1) throw new DelayedError()
      return 'ok'
    })
    const errors: EchoMQError[] = []
    w.on('error', (err) => errors.push(err as EchoMQError))
    const completed = nextEvent<[Job]>(w, 'completed')
    await fx.queue.add('j', {}, { jobId: 'x', attempts: 1 })
    expect((await completed)[0].attemptsMade).toBe(1)
    expect(errors.map((e) => e.code)).toEqual(['ERR_JOB_STATE'])
  })
})

/** Redis's clock (ms): a due time is set by it. */
async function redisNow(): Promise<number> {
  const [s, us] = await redis.client.time()
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

describe('changeDelay', () => {
  it('reschedules a delayed job from now; job.delay says so while it waits, 0 once promoted (as BullMQ)', async () => {
    const job = await fx.queue.add('j', {}, { jobId: 'd', delay: 3_600_000 })
    const before = await redisNow()
    await job.changeDelay(60_000)
    const after = await redisNow()
    expect(job.delay).toBe(60_000)
    const due = Number(await redis.client.zscore(fx.keys.delayed, 'd'))
    expect(due).toBeGreaterThanOrEqual(before + 60_000)
    expect(due).toBeLessThanOrEqual(after + 60_000)
    expect(job.dueAt).toBe(Math.floor(due))
    const stored = (await fx.queue.getJob('d')) as Job
    expect([stored.state, stored.delay, stored.dueAt, stored.opts.delay]).toEqual(['delayed', 60_000, job.dueAt, 3_600_000])

    await fx.queue.promoteJob('d')
    expect(await redis.client.hexists(fx.keys.job('d'), 'lastDelay')).toBe(0)
    expect([(await fx.queue.getJob('d'))?.delay, (await fx.queue.getJob('d'))?.opts.delay]).toEqual([0, 3_600_000])
  })

  it('a retry waiting its backoff runs at the new time; job.delay is the backoff meanwhile', async () => {
    const w = fx.worker((job: Job) => {
      if (job.attemptsMade === 0) throw new Error('first run fails')
      return 'second'
    })
    const failed = nextEvent<[Job]>(w, 'failed')
    const completed = nextEvent<[Job, unknown]>(w, 'completed')
    await fx.queue.add('j', {}, { jobId: 'b', attempts: 2, backoff: 3_600_000 })
    const [failedJob] = await failed
    expect([failedJob.state, failedJob.delay]).toEqual(['delayed', 3_600_000])
    const waiting = (await fx.queue.getJob('b')) as Job
    expect([waiting.delay, waiting.opts.delay]).toEqual([3_600_000, undefined])
    await waiting.changeDelay(0)
    expect((await completed)[1]).toBe('second')
    const done = (await fx.queue.getJob('b')) as Job
    expect([done.delay, done.lastDelay]).toEqual([0, undefined])
  })

  it("a job that is not delayed, a removed one, a scheduler's next run, a bad delay: refused, nothing changed", async () => {
    const waiting = await fx.queue.add('j', {}, { jobId: 'w' })
    const delayed = await fx.queue.add('j', {}, { jobId: 'd', delay: 3_600_000 })
    const gone = await fx.queue.add('j', {}, { jobId: 'gone', delay: 3_600_000 })
    await gone.remove()
    // A scheduler's next run: its id says when it is due, so its schedule is changed, not its delay.
    const run = (await fx.queue.upsertJobScheduler('nightly', { pattern: '0 30 2 * * *' })) as Job
    expect(run.state).toBe('delayed')
    const before = await snapshot()
    const refusal = async (promise: Promise<unknown>) => {
      const e = (await promise.catch((err: unknown) => err)) as EchoMQError
      return [e.code, e.message]
    }
    expect(await refusal(waiting.changeDelay(1_000))).toEqual([
      'ERR_JOB_STATE',
      'job w of queue q is wait, not delayed: its delay was not changed',
    ])
    expect((await refusal(gone.changeDelay(1_000)))[0]).toBe('ERR_JOB_MISSING')
    expect((await refusal(run.changeDelay(1_000)))[0]).toBe('ERR_JOB_STATE')
    for (const bad of [-1, 1.5, Number.NaN, '1000', 366 * 24 * 3_600_000])
      expect((await refusal(delayed.changeDelay(bad as number)))[0]).toBe('ERR_OPTIONS')
    expect(await snapshot()).toEqual(before)
    expect([waiting.delay, delayed.delay]).toEqual([0, 3_600_000])
  })
})

describe('extendLock', () => {
  it('the holder extends its lease and its deadline in the lease index; another token gets 0', async () => {
    const release: (() => void)[] = []
    const w = fx.worker(() => new Promise<void>((resolve) => release.push(resolve)), { lockDuration: 400 })
    const active = nextEvent<[Job]>(w, 'active')
    await fx.queue.add('j', {}, { jobId: 'e' })
    const [job] = await active
    const token = job.token as string
    expect(await job.extendLock(token, 60_000)).toBe(1)
    const pttl = await redis.client.pttl(fx.keys.lock('e'))
    expect(pttl).toBeGreaterThan(30_000)
    const deadline = Number(await redis.client.zscore(fx.keys.active, 'e'))
    expect(deadline - Date.now()).toBeGreaterThan(30_000)

    const before = await redis.client.pttl(fx.keys.lock('e'))
    expect(await job.extendLock('other:1', 1)).toBe(0)
    expect(await redis.client.get(fx.keys.lock('e'))).toBe(token)
    expect(await redis.client.pttl(fx.keys.lock('e'))).toBeGreaterThan(before - 5_000)
    expect(await codeOf(job.extendLock(token, 0))).toBe('ERR_OPTIONS')
    expect(await codeOf(job.extendLock('', 1000))).toBe('ERR_OPTIONS')
    release[0]?.()
    await nextEvent(w, 'completed')
    expect(await job.extendLock(token, 1000)).toBe(0)
    expect(await redis.client.exists(fx.keys.lock('e'))).toBe(0)
  })
})

describe('clearLogs', () => {
  it("a processor trims its job's log; bad input is refused and changes nothing", async () => {
    const trimmed = new Promise<string[]>((resolve) => {
      fx.worker(async (job: Job) => {
        for (const row of ['one', 'two', 'three']) await job.log(row)
        await job.clearLogs(1)
        resolve((await fx.queue.getJobLogs(job.id)).logs)
      })
    })
    const job = await fx.queue.add('j', {}, { jobId: 'logs' })
    expect(await trimmed).toEqual(['three'])

    for (const bad of [-1, 1.5, '2', null]) expect(await codeOf(job.clearLogs(bad as number))).toBe('ERR_OPTIONS')
    expect(await fx.queue.getJobLogs('logs')).toEqual({ logs: ['three'], count: 1 })
  })
})
