/**
 * A job's whole life on a real Redis: retries with backoff, delayed jobs, bounded retention, failed-job
 * operations (getJobs, retryJobs, remove) and worker names. Timings are checked as lower bounds (a retry
 * never comes before its backoff) and as "no polling" (commands counted); speed is the benchmarks' job.
 */
import { hostname } from 'node:os'
import { describe, expect, it } from 'vitest'
import { EchoMQError, type Job, Queue, sweep, Worker } from '../../lib/index.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { countingClient } from '../helpers/counting.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'
import { nextEvent, waitFor } from '../helpers/wait.js'
import { spawnWorker } from '../helpers/worker-process.js'

const redis = useRedis()
const keys = queueKeys('emq', 'q')
const fx = useQueue(redis, {
  workers: { lockDuration: 1_000, closeTimeout: 500 },
  onError: (err) => {
    throw err
  },
})
const worker = fx.worker

/** The start time of each run of each job, by the monotonic clock. */
function runLog() {
  const starts = new Map<string, number[]>()
  return {
    starts,
    record(job: Job) {
      starts.set(job.id, [...(starts.get(job.id) ?? []), performance.now()])
    },
    gaps(id: string) {
      const s = starts.get(id) ?? []
      return s.slice(1).map((t, i) => t - (s[i] as number))
    },
  }
}

describe('retries with backoff', () => {
  it('exponential: fails twice, then succeeds; the retries wait delay, then 2 x delay; the job waits in delayed meanwhile', async () => {
    const runs = runLog()
    const w = worker((job) => {
      runs.record(job)
      if (job.attemptsStarted < 3) throw new Error(`run ${job.attemptsStarted} fails`)
      return 'third time'
    })
    const failures: [string, string][] = []
    w.on('failed', (job: Job, err: Error) => failures.push([job.state, err.message]))
    const done = nextEvent<[Job]>(w, 'completed')
    await fx.queue.add('flaky', {}, { jobId: 'x', attempts: 3, backoff: { type: 'exponential', delay: 150 } })

    await waitFor(async () => (await fx.queue.getJob('x'))?.state === 'delayed', { what: 'the first retry to wait in delayed' })
    const waiting = await fx.queue.getJob('x')
    const counts = await fx.queue.counts()
    const [completed] = await done

    expect(waiting).toMatchObject({ state: 'delayed', attemptsMade: 1, lastError: 'run 1 fails' })
    expect(waiting?.dueAt).toBeGreaterThan(waiting?.createdOn as number)
    expect(counts).toMatchObject({ delayed: 1, wait: 0, active: 0 })
    expect(failures).toEqual([
      ['delayed', 'run 1 fails'],
      ['delayed', 'run 2 fails'],
    ])
    expect(completed).toMatchObject({ id: 'x', attemptsMade: 3, state: 'completed' })
    const [first, second] = runs.gaps('x')
    expect(first).toBeGreaterThanOrEqual(150 - 5)
    expect(second).toBeGreaterThanOrEqual(300 - 5)
  })

  it('a number is a fixed delay; maxDelay caps an exponential one; jitter draws from [delay x (1 - jitter), delay]', async () => {
    const runs = runLog()
    worker((job) => {
      runs.record(job)
      if (job.attemptsStarted < 3) throw new Error('again')
      return 'ok'
    })
    await fx.queue.add('fixed', {}, { jobId: 'fixed', attempts: 3, backoff: 100 })
    await fx.queue.add('capped', {}, { jobId: 'capped', attempts: 3, backoff: { type: 'exponential', delay: 100, maxDelay: 120 } })
    await fx.queue.add('jitter', {}, { jobId: 'jitter', attempts: 3, backoff: { type: 'fixed', delay: 200, jitter: 0.5 } })

    await waitFor(async () => (await fx.queue.counts()).completed === 3, { timeoutMs: 10_000, what: 'three completions' })

    for (const gap of runs.gaps('fixed')) expect(gap).toBeGreaterThanOrEqual(100 - 5)
    for (const gap of runs.gaps('capped')) expect(gap).toBeGreaterThanOrEqual(100 - 5)
    for (const gap of runs.gaps('jitter')) expect(gap).toBeGreaterThanOrEqual(100 - 5)
    const [firstCapped = 0, secondCapped = 0] = runs.gaps('capped')
    // Uncapped, the second retry would wait 200 ms; capped, it waits 120 (scheduling adds a little).
    expect(secondCapped - firstCapped).toBeLessThan(100)
  })

  it('no backoff: a failed attempt is retried at once (back of wait, not delayed)', async () => {
    await fx.queue.add('x', {}, { jobId: 'now', attempts: 2 })
    const states: string[] = []
    const w = worker((job) => {
      if (job.attemptsStarted === 1) throw new Error('once')
      return 'ok'
    })
    w.on('failed', (job: Job) => states.push(job.state))
    await nextEvent(w, 'completed')
    expect(states).toEqual(['wait'])
  })

  it('a stall recovery ignores the backoff: the job is served next, not delayed', async () => {
    const held = await spawnWorker({ REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '300', HEARTBEAT_MS: '100' })
    try {
      await fx.queue.add('x', {}, { jobId: 's', attempts: 3, backoff: 60_000 })
      await held.waitForMessage('active', 's')
      held.kill('SIGKILL')
      await waitFor(async () => (await redis.client.exists(keys.lock('s'))) === 0, { what: 'the lease to lapse' })
      await sweep(redis.client, 'q', { graceMs: 0 })
      const recovered = await sweep(redis.client, 'q', { graceMs: 0 })

      expect(recovered.recovered).toEqual(['s'])
      expect(await fx.queue.getJob('s')).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1 })
      expect(await redis.client.lrange(keys.wait, -1, -1)).toEqual(['s'])
    } finally {
      await held.stop()
    }
  })
})

describe('delayed jobs', () => {
  it('wait in delayed with their due time, then an idle worker starts them after it without polling', async () => {
    // The worker's commands, counted, for a short and a long delay: polling would send more for the long one.
    const sentFor = async (delay: number, id: string) => {
      const counting = await countingClient(redis.port)
      const starts = new Map<string, number>()
      // direct: a worker on a counting client, whose commands are under test
      const w = new Worker('q', (job) => void starts.set(job.id, performance.now()), { connection: counting.client, closeTimeout: 500 })
      try {
        await waitFor(async () => /cmd=bzpopmin/.test(String(await redis.client.call('CLIENT', 'LIST'))), { what: 'the worker to block' })
        counting.reset()
        const addedAt = performance.now()
        const job = await fx.queue.add('later', { n: 1 }, { jobId: id, delay })
        const stored = await fx.queue.getJob(id)
        const counts = await fx.queue.counts()
        await nextEvent(w, 'completed')
        const sent = [...counting.sent]
        await w.close()
        return { job, stored, counts, startedAfter: (starts.get(id) as number) - addedAt, sent }
      } finally {
        counting.close()
      }
    }

    const short = await sentFor(300, 'short')
    const long = await sentFor(1_200, 'long')

    expect(short.job.state).toBe('delayed')
    expect(short.job).toMatchObject({ createdOn: short.stored?.createdOn, dueAt: short.stored?.dueAt }) // Redis's clock
    expect(short.stored).toMatchObject({ state: 'delayed', dueAt: expect.any(Number) })
    expect((short.stored?.dueAt as number) - (short.stored?.createdOn as number)).toBe(300)
    expect(short.counts).toMatchObject({ delayed: 1, wait: 0 })
    expect(short.startedAfter).toBeGreaterThanOrEqual(300 - 5)
    expect(long.startedAfter).toBeGreaterThanOrEqual(1_200 - 5)
    expect(long.sent.length).toBe(short.sent.length)
    expect(long.sent.length).toBeLessThanOrEqual(12)
  })

  it('many delayed jobs due at different times all run once, none before its due time', async () => {
    const starts = new Map<string, number>()
    worker(
      (job) => {
        starts.set(job.id, performance.now())
        return 'ok'
      },
      { concurrency: 5 },
    )
    const added = performance.now()
    const delays = Array.from({ length: 40 }, (_, i) => 20 * i)
    for (const [i, delay] of delays.entries()) await fx.queue.add('d', {}, { jobId: `d${i}`, delay })

    await waitFor(async () => (await fx.queue.counts()).completed === 40, { timeoutMs: 10_000, what: '40 delayed jobs' })

    for (const [i, delay] of delays.entries()) expect((starts.get(`d${i}`) as number) - added).toBeGreaterThanOrEqual(delay - 5)
  })

  it('a worker closing while it waits for a due time hands it to another idle worker', async () => {
    const first = worker(() => 'ok')
    await waitFor(async () => /cmd=bzpopmin/.test(String(await redis.client.call('CLIENT', 'LIST'))), { what: 'the first worker to block' })
    await fx.queue.add('later', {}, { jobId: 'h', delay: 800 })
    await waitFor(async () => (await redis.client.zcard(keys.marker)) === 0, { what: 'the first worker to pop the due time' })
    await first.close()
    const second = worker(() => 'ok')
    const [job] = await nextEvent<[Job]>(second, 'completed')
    expect(job.id).toBe('h')
  })
})

describe('bounded retention', () => {
  async function runJobs(n: number, options: Record<string, unknown> = {}, processor: (job: Job) => unknown = () => 'ok') {
    for (let i = 0; i < n; i++) await fx.queue.add('job', { i }, { jobId: `r${i}`, ...options })
    let finished = 0
    const w = worker(processor, { concurrency: 10 })
    w.on('completed', () => finished++)
    w.on('failed', (job: Job) => job.state === 'failed' && finished++)
    await waitFor(() => finished === n, { timeoutMs: 20_000, what: `${n} jobs finished` })
    return w
  }

  it('by default keeps the last 1,000 completed (within its slack between sweeps, exactly after one) and removes the rest', async () => {
    await runJobs(1_250)
    const between = (await fx.queue.counts()).completed
    await sweep(redis.client, 'q')

    expect(between).toBeLessThanOrEqual(1_000 + 100)
    expect((await fx.queue.counts()).completed).toBe(1_000)
    expect(await redis.client.exists(keys.job('r0'), keys.job('r249'))).toBe(0)
    expect(await redis.client.exists(keys.job('r250'), keys.job('r1249'))).toBe(2)
    // The keyspace holds the kept jobs and the queue's own keys, not every job ever run.
    expect(await redis.client.dbsize()).toBeLessThan(1_000 + 10)
  })

  it('removeOnComplete: true removes a job as it completes; removeOnFail { count } keeps the last failures', async () => {
    await runJobs(30, { removeOnComplete: true, removeOnFail: { count: 3 }, attempts: 1 }, (job) => {
      if ((job.data as { i: number }).i % 2 === 1) throw new Error('odd')
      return 'even'
    })
    await sweep(redis.client, 'q')

    const counts = await fx.queue.counts()
    expect(counts).toMatchObject({ completed: 0, failed: 3 })
    expect(await fx.queue.getJob('r0')).toBeUndefined()
    const kept = (await fx.queue.getJobs('failed')).map((j) => (j.data as { i: number }).i)
    expect(kept).toHaveLength(3)
    expect(kept.every((i) => i % 2 === 1)).toBe(true)
  })

  it('age: a sweep removes completed jobs older than the age; a removed id can be added again', async () => {
    await runJobs(5, { removeOnComplete: { age: 0.15 } })
    expect((await fx.queue.counts()).completed).toBe(5)
    await waitFor(async () => (await sweep(redis.client, 'q')) && (await fx.queue.counts()).completed === 0, { what: 'the age to pass' })

    const again = await fx.queue.add('job', { again: true }, { jobId: 'r0' })
    expect(again).toMatchObject({ id: 'r0', state: 'wait', data: { again: true } })
  })

  it('defaultJobOptions apply to every add, and an add option wins over them', async () => {
    // direct: a second Queue object of the queue, with the defaultJobOptions under test
    const q = new Queue('q', { connection: redis.client, defaultJobOptions: { attempts: 7, removeOnComplete: false } })
    const a = await q.add('a', {})
    const b = await q.add('b', {}, { attempts: 2 })
    expect((await q.getJob(a.id))?.attempts).toBe(7)
    expect((await q.getJob(b.id))?.attempts).toBe(2)
    expect(await redis.client.hget(keys.job(a.id), 'keep')).toBe('')
  })
})

describe('failed-job operations', () => {
  async function failJobs(ids: string[]) {
    for (const id of ids) await fx.queue.add('job', { id }, { jobId: id, attempts: 1 })
    const w = worker(() => {
      throw new Error('downstream is down')
    })
    await waitFor(async () => (await fx.queue.counts()).failed === ids.length, { what: `${ids.length} failures` })
    await w.close()
  }

  it('getJobs lists each state in its order: wait next first, delayed by due time, failed most recent first', async () => {
    await failJobs(['f1', 'f2', 'f3'])
    for (const id of ['w1', 'w2', 'w3']) await fx.queue.add('job', {}, { jobId: id })
    await fx.queue.add('job', {}, { jobId: 'late', delay: 60_000 })
    await fx.queue.add('job', {}, { jobId: 'soon', delay: 30_000 })

    expect((await fx.queue.getJobs('wait', {})).map((j) => j.id)).toEqual(['w1', 'w2', 'w3'])
    expect((await fx.queue.getJobs('delayed', {})).map((j) => j.id)).toEqual(['soon', 'late'])
    expect((await fx.queue.getJobs('failed', {})).map((j) => j.id)).toEqual(['f3', 'f2', 'f1'])
    expect((await fx.queue.getJobs('failed', { start: 1, end: 1 })).map((j) => j.id)).toEqual(['f2'])
    expect(await fx.queue.getJobs('completed', {})).toEqual([])
    expect((await fx.queue.getJobs('failed', {}))[0]).toMatchObject({ state: 'failed', failedReason: 'downstream is down' })
  })

  it('retryJobs({ ids }) sends failed jobs back keeping their attemptsMade and history (BullMQ), or with a fresh budget', async () => {
    await failJobs(['a', 'b'])

    const moved = await fx.queue.retryJobs({ ids: ['a'] })
    expect(await fx.queue.retryJobs({ ids: ['b'], resetAttemptsMade: true })).toEqual(['b'])

    expect(moved).toEqual(['a'])
    expect(await fx.queue.getJob('a')).toMatchObject({
      state: 'wait',
      attemptsMade: 1,
      attemptsStarted: 1,
      lastError: 'downstream is down',
      retried: 1,
    })
    expect(await fx.queue.getJob('b')).toMatchObject({ state: 'wait', attemptsMade: 0, attemptsStarted: 1, retried: 1 })
    const a = await fx.queue.getJob('a')
    expect([a?.failedReason, a?.startedOn, a?.finishedOn]).toEqual([undefined, undefined, undefined])
    expect(await fx.queue.counts()).toMatchObject({ wait: 2, failed: 0 })
    const w = worker(() => 'fixed')
    await waitFor(async () => (await fx.queue.counts()).completed === 2, { what: 'both retried jobs completed' })
    expect(await fx.queue.getJob('a')).toMatchObject({ state: 'completed', attemptsMade: 2, attemptsStarted: 2 })
    expect(await fx.queue.getJob('b')).toMatchObject({ state: 'completed', attemptsMade: 1, attemptsStarted: 2 })
    await w.close()
  })

  it('a job retried after its attempts are used runs once more: failing again, it fails for good (BullMQ)', async () => {
    await fx.queue.add('x', {}, { jobId: 'once', attempts: 2 })
    const w = worker(() => {
      throw new Error('still down')
    })
    await waitFor(async () => (await fx.queue.getJob('once'))?.state === 'failed', { what: 'two attempts used' })
    await fx.queue.retryJobs({ ids: ['once'] })
    await waitFor(async () => (await fx.queue.getJob('once'))?.state === 'failed', { what: 'the one more run failed' })
    expect(await fx.queue.getJob('once')).toMatchObject({ attemptsMade: 3, attemptsStarted: 3 })
    await w.close()
  })

  it("retryJobs takes BullMQ's { count, state, timestamp }: only jobs failed by timestamp; an unknown state refused", async () => {
    await failJobs(['a', 'b'])
    const [a, b] = [await fx.queue.getJob('a'), await fx.queue.getJob('b')]
    expect(await fx.queue.retryJobs({ count: 10, state: 'failed', timestamp: (a?.finishedOn as number) - 1 })).toEqual([])
    const cut = Math.min(a?.finishedOn as number, b?.finishedOn as number)
    const first = await fx.queue.retryJobs({ timestamp: cut })
    expect(first.length).toBeGreaterThanOrEqual(1)
    // A completed state is retried too (test/queue/retry-completed.test.ts); none completed here.
    expect(await fx.queue.retryJobs({ state: 'completed' })).toEqual([])
    await expect(fx.queue.retryJobs({ state: 'waiting' } as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    await expect(fx.queue.retryJobs({ count: 0 })).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  })

  it('retryJobs() retries every failed job, oldest first, and { limit } only that many', async () => {
    await failJobs(['a', 'b', 'c'])
    expect(await fx.queue.retryJobs({ limit: 2 })).toEqual(['a', 'b'])
    expect(await fx.queue.retryJobs()).toEqual(['c'])
    expect(await fx.queue.retryJobs()).toEqual([])
  })

  it('retrying an id that is not failed is ERR_JOB_STATE and changes nothing', async () => {
    await failJobs(['a'])
    await fx.queue.add('job', {}, { jobId: 'waiting' })
    const before = await snapshot(redis.client)

    const err = await fx.queue.retryJobs({ ids: ['a', 'waiting'] }).catch((e: unknown) => e)

    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe('ERR_JOB_STATE')
    expect((err as Error).message).toMatch(/job waiting of queue q is wait, not failed/)
    expect(await snapshot(redis.client)).toEqual(before)
    const missing = await fx.queue.retryJobs({ ids: ['ghost'] }).catch((e: unknown) => e)
    expect((missing as Error).message).toMatch(/job ghost of queue q does not exist; nothing was retried/)
  })

  it('remove() removes a job in any state but active: 1, or 0 for a job in flight (job.remove() throws ERR_JOB_ACTIVE)', async () => {
    let release: () => void = () => undefined
    const w = worker(() => new Promise<string>((resolve) => (release = () => resolve('done'))))
    await fx.queue.add('job', {}, { jobId: 'running' })
    await waitFor(async () => (await fx.queue.getJob('running'))?.state === 'active', { what: 'a job in flight' })
    await fx.queue.add('job', {}, { jobId: 'waiting' })
    await fx.queue.add('job', {}, { jobId: 'later', delay: 60_000 })
    const before = await snapshot(redis.client)

    // BullMQ's answers: 0 for a job in flight (locked), left alone; 1 otherwise, a missing job included.
    expect(await fx.queue.remove('running')).toBe(0)
    expect(await snapshot(redis.client)).toEqual(before)
    const viaJob = await ((await fx.queue.getJob('running')) as Job).remove().catch((e: unknown) => e)
    expect((viaJob as EchoMQError).code).toBe('ERR_JOB_ACTIVE')
    expect(await fx.queue.remove('later')).toBe(1)
    expect(await fx.queue.remove('waiting')).toBe(1)
    expect(await fx.queue.remove('nothing')).toBe(1)
    release()
    await nextEvent(w, 'completed')
    await w.close()
    await failJobs(['gone-bad'])
    expect(await fx.queue.remove('gone-bad')).toBe(1)
    expect(await fx.queue.remove('running')).toBe(1)
    expect(await fx.queue.counts()).toMatchObject({ failed: 0, delayed: 0, wait: 0, completed: 0 })
    expect(await fx.queue.getJob('gone-bad')).toBeUndefined()
  })
})

describe('worker names', () => {
  it('a worker records its name on the jobs it takes (default <hostname>:<pid>)', async () => {
    const named = worker(() => 'ok', { name: 'billing-7' })
    await fx.queue.add('job', {}, { jobId: 'named' })
    await waitFor(async () => (await fx.queue.getJob('named'))?.state === 'completed', { what: 'the job done' })
    expect((await fx.queue.getJob('named'))?.workerName).toBe('billing-7')
    await named.close()

    worker(() => 'ok')
    await fx.queue.add('job', {}, { jobId: 'default' })
    await waitFor(async () => (await fx.queue.getJob('default'))?.state === 'completed', { what: 'the job done' })
    expect((await fx.queue.getJob('default'))?.workerName).toBe(`${hostname()}:${process.pid}`)
  })

  it("a killed worker's name is in its recovered job's lastError", async () => {
    const held = await spawnWorker({ REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '300', HEARTBEAT_MS: '100', WORKER_NAME: 'host-a:41' })
    try {
      await fx.queue.add('x', {}, { jobId: 'k', attempts: 1 })
      await held.waitForMessage('active', 'k')
      held.kill('SIGKILL')
      await waitFor(async () => (await redis.client.exists(keys.lock('k'))) === 0, { what: 'the lease to lapse' })
      await sweep(redis.client, 'q', { graceMs: 0 })
      await sweep(redis.client, 'q', { graceMs: 0 })
      expect(await fx.queue.getJob('k')).toMatchObject({
        state: 'wait',
        workerName: 'host-a:41',
        lastError: expect.stringMatching(/\(worker host-a:41\)/),
      })
    } finally {
      await held.stop()
    }
  })
})

describe('bad input changes nothing', () => {
  it.each([
    ['a negative delay', { delay: -1 }, /delay/],
    ['a non-finite delay', { delay: Number.POSITIVE_INFINITY }, /delay .* got: Infinity/],
    ['a delay that is not a number', { delay: Number.NaN }, /delay .* got: NaN/],
    ['a fractional delay', { delay: 1.5 }, /delay/],
    [
      'a backoff type that is not a name',
      { backoff: { type: 'linear,2', delay: 10 } },
      /backoff.type to be fixed, exponential or a custom name/,
    ],
    ['a backoff without a delay', { backoff: { type: 'fixed' } }, /backoff.delay/],
    ['a jitter above 1', { backoff: { type: 'fixed', delay: 10, jitter: 2 } }, /jitter/],
    ['an unknown backoff option', { backoff: { type: 'fixed', delay: 10, factor: 2 } }, /unknown backoff option "factor"/],
    ['a retention count that is not an integer', { removeOnComplete: { count: 2.5 } }, /removeOnComplete.count/],
    ['a negative retention age', { removeOnFail: { age: -1 } }, /removeOnFail.age/],
    ['a retention that is a string', { removeOnComplete: 'yes' }, /removeOnComplete/],
  ])('%s is ERR_OPTIONS', async (_label, options, message) => {
    const before = await snapshot(redis.client)
    const err = await fx.queue.add('job', {}, options as never).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe('ERR_OPTIONS')
    expect((err as Error).message).toMatch(message)
    expect(await snapshot(redis.client)).toEqual(before)
  })

  it.each([
    ['getJobs of an unknown state', () => fx.queue.getJobs('lost' as never), 'ERR_OPTIONS'],
    ['getJobs past the page limit', () => fx.queue.getJobs('wait', { start: 0, end: 5_000 }), 'ERR_OPTIONS'],
    ['retryJobs with ids and limit', () => fx.queue.retryJobs({ ids: ['a'], limit: 1 }), 'ERR_OPTIONS'],
    ['retryJobs with a bad id', () => fx.queue.retryJobs({ ids: ['a:b'] }), 'ERR_JOB_ID'],
    ['retryJobs with an empty list', () => fx.queue.retryJobs({ ids: [] }), 'ERR_OPTIONS'],
    ['remove with a bad id', () => fx.queue.remove('wait'), 'ERR_JOB_ID'],
    // direct: the constructors' option validation is under test
    ['a queue default with a job id', () => new Queue('q', { defaultJobOptions: { jobId: 'x' } as never }), 'ERR_OPTIONS'],
    ['a worker name that is empty', () => new Worker('q', () => 1, { name: '' }), 'ERR_OPTIONS'], // direct: as above
  ])('%s is rejected', async (_label, call, code) => {
    const before = await snapshot(redis.client)
    const err = await (async () => call())().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe(code)
    expect(await snapshot(redis.client)).toEqual(before)
  })
})
