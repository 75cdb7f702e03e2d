import { describe, expect, it } from 'vitest'
import { EchoMQError, type Job, Queue, sweep } from '../../lib/index.js'
import type { JobFields } from '../../lib/job.js'
import { CLOSE_MARGIN_MS } from '../../lib/options.js'
import { finish, type Lease } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useQueue } from '../helpers/fixture.js'
import { addJobs, holdJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 400, heartbeatInterval: 100, closeTimeout: 300 } })
const worker = fx.worker
const keys = queueKeys('emq', 'q')

/** A processor that holds each job until the test releases it. */
function held() {
  const releases = new Map<string, (value: unknown) => void>()
  const processor = (job: Job) => new Promise((resolve) => releases.set(job.id, resolve))
  return { processor, release: (id: string, value: unknown = 'ok') => releases.get(id)?.(value), has: (id: string) => releases.has(id) }
}

describe('worker: take, lease and heartbeat', () => {
  it('takes a job with a lease set with PX holding its token, and the heartbeat renews it', async () => {
    const hold = held()
    const w = worker(hold.processor, { lockDuration: 600, heartbeatInterval: 150 })
    const [job] = await Promise.all([nextEvent<[Job]>(w, 'active').then(([j]) => j), fx.queue.add('send', { to: 'a@b.c' }, { jobId: 'a' })])

    const token = await redis.client.get(keys.lock('a'))
    const firstTtl = await redis.client.pttl(keys.lock('a'))
    const firstDeadline = Number(await redis.client.zscore(keys.active, 'a'))
    // Past several heartbeats and past the original lease: still held, deadline moved forward.
    await waitFor(async () => Number(await redis.client.zscore(keys.active, 'a')) > firstDeadline + 700, { what: 'lease renewals' })

    expect(job?.id).toBe('a')
    expect(token).toMatch(new RegExp(`^${w.id}:1$`))
    expect(firstTtl).toBeGreaterThan(0)
    expect(firstTtl).toBeLessThanOrEqual(600)
    expect(await redis.client.get(keys.lock('a'))).toBe(token)
    expect(await redis.client.pttl(keys.lock('a'))).toBeGreaterThan(0)
    hold.release('a')
    await nextEvent(w, 'completed')
    expect(await fx.queue.getJob('a')).toMatchObject({ state: 'completed', returnValue: 'ok', attemptsMade: 1 })
    expect(await redis.client.exists(keys.lock('a'))).toBe(0)
  })

  it('an idle worker blocks on Redis and wakes when a job is added', async () => {
    const w = worker(() => 'done')
    await waitFor(async () => String(await redis.client.call('CLIENT', 'LIST')).includes('cmd=bzpopmin'), { what: 'worker to block' })

    const [[job]] = await Promise.all([nextEvent<[Job]>(w, 'completed'), fx.queue.add('x', 1, { jobId: 'wake' })])

    expect(job.id).toBe('wake')
  })

  it('one worker holding 200 jobs renews them with about one script call per tick', async () => {
    const hold = held()
    for (let i = 0; i < 200; i++) await fx.queue.add('job', i, { jobId: `r${i}` })
    const w = worker(hold.processor, { concurrency: 200, lockDuration: 2_000, heartbeatInterval: 200, skipStalledCheck: true })
    await waitFor(async () => (await redis.client.zcard(keys.active)) === 200, { what: '200 jobs taken' })
    await redis.client.config('RESETSTAT')
    const since = performance.now()
    // A heartbeat is the one script here that reads leases with MGET (one per call, however many leases):
    // counted by it, a take or finish call still in flight as the stats reset is not taken for one.
    const callsOf = (stats: string, command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
    await waitFor(async () => callsOf(await redis.client.info('commandstats'), 'mget') >= 5, { what: 'five heartbeat ticks' })
    const stats = await redis.client.info('commandstats')
    const elapsedTicks = (performance.now() - since) / 200
    const calls = callsOf(stats, 'mget')
    const renewals = callsOf(stats, 'pexpireat')

    expect(calls).toBeLessThanOrEqual(Math.ceil(elapsedTicks) + 1) // one script call per tick, not per job
    // A lease index updated many members at a time is kept a skiplist (a listpack update scans the list).
    expect(await redis.client.object('ENCODING', keys.active)).toBe('skiplist')
    expect(renewals).toBe(calls * 200) // each call renewed all 200 leases
    for (let i = 0; i < 200; i++) hold.release(`r${i}`)
    await waitFor(async () => (await fx.queue.counts()).completed === 200, { what: 'all completed' })
    expect(w.listenerCount('error')).toBe(0)
  })
})

describe('worker: finishing', () => {
  it('a processor error uses one attempt and returns the job to wait, then fails it on the last attempt', async () => {
    const w = worker(() => {
      throw new Error('boom')
    })
    const failures: JobFields[] = []
    w.on('failed', (job: Job) => failures.push({ ...job }))

    await fx.queue.add('x', {}, { jobId: 'f', attempts: 2 })
    await waitFor(() => failures.length === 2, { what: 'two failures' })

    expect(failures.map((j) => j.state)).toEqual(['wait', 'failed'])
    expect(await fx.queue.getJob('f')).toMatchObject({ state: 'failed', attemptsMade: 2, attemptsStarted: 2, failedReason: 'boom' })
    expect(await fx.queue.counts()).toEqual({ wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 1 })
  })

  it.each([
    ['a BigInt', () => ({ big: 1n }), /BigInt/],
    ['a Map', () => new Map([[1, 2]]), /is a Map, which JSON stores as \{\}/],
    ['over a megabyte', () => 'x'.repeat(1024 * 1024 + 1), /bytes as JSON, more than/],
  ])(
    'a processor that succeeds with a result JSON cannot hold (%s) completes its job once; the result is stored as null and reported',
    async (_label, result, reason) => {
      let runs = 0
      const w = worker(() => {
        runs += 1
        return result()
      })
      const reported = nextEvent<[EchoMQError]>(w, 'error')
      await fx.queue.add('x', {}, { jobId: 'bad-result', attempts: 3 })
      const [err] = await reported
      await waitFor(async () => (await fx.queue.getJob('bad-result'))?.state === 'completed', { what: 'job completed' })
      expect(err).toMatchObject({ code: 'ERR_JOB_DATA' })
      expect(err.message).toMatch(reason)
      expect(await fx.queue.getJob('bad-result')).toMatchObject({ attemptsMade: 1, attemptsStarted: 1, returnValue: null })
      expect(runs).toBe(1)
    },
  )

  it("a processor's error message is kept up to 8,192 characters", async () => {
    worker(() => {
      throw new Error('e'.repeat(100_000))
    })
    await fx.queue.add('x', {}, { jobId: 'long-error', attempts: 1 })
    await waitFor(async () => (await fx.queue.getJob('long-error'))?.state === 'failed', { what: 'job failed' })
    const reason = (await fx.queue.getJob('long-error'))?.failedReason ?? ''
    expect(reason).toBe(`${'e'.repeat(8_192)}… (truncated)`)
  })

  it('a fenced-out worker cannot complete a job that another worker now holds', async () => {
    // Worker A takes the job, then stops renewing (as if paused); the job is recovered and taken by B.
    const holdA = held()
    const a = worker(holdA.processor, { lockDuration: 200, heartbeatInterval: 100 })
    await Promise.all([nextEvent(a, 'active'), fx.queue.add('x', {}, { jobId: 'fenced' })])
    const tokenA = await redis.client.get(keys.lock('fenced'))
    await (a as unknown as { core: { locks: { close(): Promise<void> } } }).core.locks.close() // A's heartbeat stops
    await waitFor(async () => (await redis.client.exists(keys.lock('fenced'))) === 0, { what: "A's lease to lapse" })
    await sweep(redis.client, 'q', { graceMs: 0 })
    expect((await sweep(redis.client, 'q', { graceMs: 0 })).recovered).toEqual(['fenced'])
    const holdB = held()
    const b = worker(holdB.processor)
    await nextEvent(b, 'active')
    const tokenB = await redis.client.get(keys.lock('fenced'))

    const lost = nextEvent<[Job, EchoMQError]>(a, 'lockLost')
    holdA.release('fenced', 'from A')
    const [, err] = await lost

    expect(tokenB).not.toBe(tokenA)
    expect(err).toBeInstanceOf(EchoMQError)
    expect(err.code).toBe('ERR_LOCK_LOST')
    expect(await fx.queue.getJob('fenced')).toMatchObject({ state: 'active', attemptsMade: 0, stalledCounter: 1, attemptsStarted: 2 })
    expect(await redis.client.get(keys.lock('fenced'))).toBe(tokenB)
    holdB.release('fenced', 'from B')
    await nextEvent(b, 'completed')
    expect(await fx.queue.getJob('fenced')).toMatchObject({ state: 'completed', returnValue: 'from B' })
  })

  it('a renewal that finds the job recovered aborts the signal and emits lockLost', async () => {
    let signal: AbortSignal | undefined
    const w = worker((_job, _token, s) => {
      signal = s
      return new Promise((_resolve, reject) => s.addEventListener('abort', () => reject(s.reason)))
    })
    await Promise.all([nextEvent(w, 'active'), fx.queue.add('x', {}, { jobId: 'stolen' })])
    // Another party takes ownership away (as a recovery by a sweep would).
    await redis.client.hset(keys.job('stolen'), 'token', 'someone-else')
    await redis.client.del(keys.lock('stolen'))

    const [job, err] = await nextEvent<[Job, EchoMQError]>(w, 'lockLost')

    expect(job.id).toBe('stolen')
    expect(err.code).toBe('ERR_LOCK_LOST')
    expect(signal?.aborted).toBe(true)
    expect((await fx.queue.getJob('stolen'))?.state).toBe('active') // untouched by the fenced-out worker
  })
})

describe('worker: close while Redis is paused', () => {
  it('close() returns on time while Redis is paused; a job taken by a finish whose reply comes later goes back to wait, unstarted', async () => {
    // Added before the worker starts: z is taken first and its finish peeks at a and b; a is taken next,
    // and its finish will carry b as the next job.
    for (const id of ['z', 'a', 'b']) await fx.queue.add('x', {}, { jobId: id })
    const started: string[] = []
    let releaseA: (() => void) | undefined
    const w = worker(
      (job) => {
        started.push(job.id)
        if (job.id === 'a') return new Promise<string>((resolve) => (releaseA = () => resolve('a done')))
        return 'done'
      },
      { closeTimeout: 400 },
    )
    await waitFor(() => started.includes('a'), { what: 'a to start' })

    redis.process.kill('SIGSTOP')
    releaseA?.() // a's finish, taking b, is sent to a Redis that does not answer...
    await new Promise((resolve) => setImmediate(resolve))
    const closeStarted = performance.now()
    await w.close() // ...before close() begins; it returns while Redis is still paused
    const closeMs = performance.now() - closeStarted
    redis.process.kill('SIGCONT')

    expect(closeMs).toBeLessThan(400 + CLOSE_MARGIN_MS + 100)
    await waitFor(async () => (await fx.queue.getJob('b'))?.state === 'wait', { what: 'b handed back once Redis answers' })
    expect(started).toEqual(['z', 'a'])
    expect(await fx.queue.getJob('a')).toMatchObject({ state: 'completed' })
    expect(await fx.queue.getJob('b')).toMatchObject({ state: 'wait', attemptsMade: 0 })
    expect(await redis.client.exists(keys.lock('b'))).toBe(0)
  })

  it('close() reports once, with counts, the jobs whose end Redis has not confirmed: a running one and a finished one', async () => {
    const hold = held()
    const w = worker(hold.processor, { concurrency: 2, lockDuration: 2000, heartbeatInterval: 1000, closeTimeout: 200 })
    const errors: EchoMQError[] = []
    w.on('error', (err) => errors.push(err as EchoMQError))
    await fx.queue.add('x', {}, { jobId: 'done' })
    await fx.queue.add('x', {}, { jobId: 'running' })
    await waitFor(() => hold.has('done') && hold.has('running'), { what: 'both jobs to start' })

    redis.process.kill('SIGSTOP')
    hold.release('done') // its finish goes to a Redis that does not answer
    await new Promise((resolve) => setImmediate(resolve))
    await w.close() // 'running' is aborted, ignores it, and is given up on: not put back in line while it runs
    const afterClose = errors.length
    redis.process.kill('SIGCONT')

    expect(errors.filter((e) => e.code === 'ERR_CONNECTION')).toHaveLength(1)
    expect(errors.find((e) => e.code === 'ERR_CONNECTION')?.message).toMatch(/1 finished job\(s\) not yet recorded/)
    expect(errors.find((e) => e.code === 'ERR_CLOSED')?.message).toMatch(/1 job\(s\) still running/)
    await waitFor(async () => (await fx.queue.getJob('done'))?.state === 'completed', { what: 'the finished job recorded' })
    // Left in `active` for the stalled sweep once its lease lapses (another worker must not run it meanwhile).
    expect(await fx.queue.getJob('running')).toMatchObject({ state: 'active', attemptsMade: 0 })
    expect(errors).toHaveLength(afterClose) // nothing reported after close() returned
  })
})

describe('worker: the application\u2019s listeners', () => {
  it('a throwing listener is reported, as thrown (BullMQ’s `error` event), and does not strand the job', async () => {
    const w = worker(() => 'done')
    const errors: Error[] = []
    const bug = new RangeError('listener bug')
    w.on('error', (err: Error) => errors.push(err))
    w.on('active', () => {
      throw bug
    })

    await Promise.all([nextEvent(w, 'completed'), fx.queue.add('x', {}, { jobId: 'l1' })])

    expect(await fx.queue.getJob('l1')).toMatchObject({ state: 'completed' })
    expect(errors).toEqual([bug])
    expect(errors[0]).toBe(bug)
  })
})

describe('worker: the registry', () => {
  it('a registry key of the wrong type is reported once and does not stop adds or work', async () => {
    await redis.client.set('emq:queues', 'not a set')
    const w = worker(() => 'done')
    const errors: Error[] = []
    w.on('error', (err: Error) => errors.push(err))

    await Promise.all([nextEvent(w, 'completed'), fx.queue.add('x', {}, { jobId: 'r1' })])

    expect(await fx.queue.getJob('r1')).toMatchObject({ state: 'completed' })
    // direct: a queue of another name (the fixture makes one queue), still writable
    await expect(new Queue('other', { connection: redis.client }).add('x', {})).resolves.toMatchObject({ state: 'wait' })
    expect(errors).toHaveLength(1)
    expect((errors[0] as EchoMQError).code).toBe('ERR_WRONG_TYPE')
  })
})

describe('worker: close', () => {
  it('close() leaves no timer behind once it resolves (a handler that returns after it is done)', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length
    for (let round = 0; round < 3; round++) {
      const before = timers()
      const w = worker(() => 'done', { concurrency: 2 })
      const [[job]] = await Promise.all([nextEvent<[Job]>(w, 'completed'), fx.queue.add('x', round)])
      await w.close()
      expect(job.data).toBe(round)
      expect(timers()).toBeLessThanOrEqual(before)
    }
  })

  it('waits for running jobs to finish', async () => {
    const hold = held()
    const w = worker(hold.processor, { closeTimeout: 10_000 })
    await Promise.all([nextEvent(w, 'active'), fx.queue.add('x', {}, { jobId: 'c1' })])

    let closed = false
    const closing = w.close().then(() => (closed = true))
    await fx.queue.add('x', {}, { jobId: 'c2' }) // not taken: the worker is closing
    expect(closed).toBe(false)
    hold.release('c1')
    await closing

    expect(await fx.queue.getJob('c1')).toMatchObject({ state: 'completed' })
    expect(await fx.queue.getJob('c2')).toMatchObject({ state: 'wait', attemptsStarted: 0 })
    expect(hold.has('c2')).toBe(false)
    await w.close() // safe twice
  })

  it('aborts jobs still running after closeTimeout and leaves them to their lease (never back in line while running)', async () => {
    let signal: AbortSignal | undefined
    const w = worker(
      (_job, _token, s) => {
        signal = s
        return new Promise(() => undefined) // never finishes
      },
      { closeTimeout: 200 },
    )
    await Promise.all([nextEvent(w, 'active'), fx.queue.add('x', {}, { jobId: 'slow', attempts: 1 })])

    await w.close()

    expect(signal?.aborted).toBe(true)
    expect((signal?.reason as EchoMQError | undefined)?.code).toBe('ERR_CLOSED')
    expect(await fx.queue.getJob('slow')).toMatchObject({ state: 'active', attemptsMade: 0, attemptsStarted: 1 })
    expect(await fx.queue.counts()).toMatchObject({ wait: 0, active: 1 })
    // No longer renewed: the lease lapses, and the sweep recovers the job then.
    await waitFor(async () => (await redis.client.exists(keys.lock('slow'))) === 0, { what: 'the lease to lapse' })
  })
})

describe('worker: reserving the next jobs', () => {
  it('a worker running short jobs reserves its next ones, and close() returns them all to wait', async () => {
    await redis.client.config('RESETSTAT')
    const w = worker(() => new Promise((resolve) => setTimeout(resolve, 1)), { concurrency: 4 })
    for (let i = 0; i < 400; i++) await fx.queue.add('job', {}, { jobId: `n${i}` })
    await waitFor(async () => (await fx.queue.counts()).completed >= 100, { what: '100 jobs done' })

    await w.close()

    // Reserving pops ids from wait (RPOP is used for nothing else); none is left reserved after close().
    const rpops = Number(/cmdstat_rpop:calls=(\d+)/.exec(await redis.client.info('commandstats'))?.[1] ?? 0)
    expect(rpops).toBeGreaterThan(0)
    expect(await redis.client.zcard(keys.reserved)).toBe(0)
    const { wait, completed, active } = await fx.queue.counts()
    expect(active).toBe(0)
    expect(wait + completed).toBe(400)
    const waiting = await redis.client.lrange(keys.wait, 0, -1)
    expect(new Set(waiting).size).toBe(400 - completed)
  })

  it('reserved ids no finish uses for a while (the jobs slowed down) go back to the front of wait', async () => {
    let slow = false
    let release: () => void = () => undefined
    worker((): unknown => (slow ? new Promise<void>((resolve) => (release = resolve)) : 'quick'))
    // Enough quick jobs that the worker is still reserving while the test looks.
    await addJobs(
      redis.client,
      'q',
      Array.from({ length: 3_000 }, (_, i) => `s${i}`),
    )
    await waitFor(async () => (await redis.client.zcard(keys.reserved)) > 0, { what: 'a reservation', intervalMs: 1 })
    slow = true

    await waitFor(async () => (await redis.client.zcard(keys.reserved)) === 0 && (await fx.queue.counts()).active === 1, {
      what: 'the reservations returned while a slow job runs',
    })
    const { wait, active, completed } = await fx.queue.counts()
    release()
    expect(wait + active + completed).toBe(3_000)
  })

  it("a dead worker's reservations go back to the front of wait with the next sweep once they expire", async () => {
    await addJobs(redis.client, 'q', ['a', 'b', 'c', 'd'])
    const [lease] = await holdJobs(redis.client, 'q', 1, { leaseMs: 60_000, workerToken: 'w' })
    const taker = { workerToken: 'w', leaseMs: 60_000, workerName: 'w' }
    const next = { ...taker, candidates: [], reservedCandidates: false, reserve: 2, reserveMs: 50, peek: 0 }
    const { reserved } = await finish(redis.client, keys, lease as Lease, 'complete', '"done"', next)
    expect(reserved).toEqual(['b', 'c'])
    expect(await fx.queue.counts()).toMatchObject({ wait: 3 }) // reserved jobs are still waiting
    expect((await fx.queue.getJobs('wait', {})).map((j) => j.id)).toEqual(['b', 'c', 'd'])

    await waitFor(async () => (await sweep(redis.client, 'q')) && (await redis.client.zcard(keys.reserved)) === 0, {
      what: 'the expired reservations returned',
    })
    expect((await redis.client.lrange(keys.wait, 0, -1)).reverse()).toEqual(['b', 'c', 'd'])
  })

  it('a finish replayed after its reply was lost hands back the ids the first call reserved, and only those', async () => {
    await addJobs(redis.client, 'q', ['a', 'b', 'c', 'd', 'e'])
    const [first, second] = await holdJobs(redis.client, 'q', 2, { leaseMs: 60_000, workerToken: 'w' })
    const taker = { workerToken: 'w', leaseMs: 60_000, workerName: 'w' }
    const next = { ...taker, candidates: [], reservedCandidates: false, reserve: 2, reserveMs: 60_000, peek: 0 }
    const done = await finish(redis.client, keys, first as Lease, 'complete', '"done"', next)
    expect(done.reserved).toEqual(['c', 'd'])
    const replay = await finish(redis.client, keys, first as Lease, 'complete', '"done"', next)
    expect(replay).toMatchObject({ state: 'completed', reserved: ['c', 'd'] })
    expect(await redis.client.zcard(keys.reserved)).toBe(2) // the replay reserved nothing more

    // Another run's finish (its token differs) that reserved nothing never sees this list.
    const other = await finish(redis.client, keys, second as Lease, 'complete', '"done"', { ...next, reserve: 0 })
    expect(other.reserved).toEqual([])
    const otherReplay = await finish(redis.client, keys, second as Lease, 'complete', '"done"', { ...next, reserve: 0 })
    expect(otherReplay).toMatchObject({ state: 'completed', reserved: [] })
  })
})

describe('worker events', () => {
  it('carry BullMQ\u2019s arguments, `prev` last: active (job, "waiting"), completed (job, result, "active"), failed (job, err, "active")', async () => {
    const seen: unknown[][] = []
    const w = worker(async (job: Job) => {
      if (job.name === 'bad') throw new Error('no')
      return 'ok'
    })
    w.on('active', (job: Job, prev: string) => seen.push(['active', job.id, prev]))
    w.on('completed', (job: Job, result: unknown, prev: string) => seen.push(['completed', job.id, result, prev]))
    w.on('failed', (job: Job, err: Error, prev: string) => seen.push(['failed', job.id, err.message, prev]))
    await fx.queue.add('good', {}, { jobId: 'g' })
    await fx.queue.add('bad', {}, { jobId: 'b' })
    await waitFor(() => seen.length === 4, { what: 'four events' })

    expect(seen).toEqual(
      expect.arrayContaining([
        ['active', 'g', 'waiting'],
        ['completed', 'g', 'ok', 'active'],
        ['active', 'b', 'waiting'],
        ['failed', 'b', 'no', 'active'],
      ]),
    )
  })
})
