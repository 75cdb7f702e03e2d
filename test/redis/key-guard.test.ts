/**
 * Every script runs under a key guard (test/helpers/key-guard.ts, installed with setScriptWrapper): any
 * redis.call on a key not passed in KEYS, any command the guard does not know, or a script run with no
 * KEYS fails the script. The whole flow runs under it on a private standalone Redis; negative tests
 * prove the guard fires.
 */
import { createHash } from 'node:crypto'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { type Job, Queue, QueueEvents, sweep } from '../../lib/index.js'
import { loadScript, SCRIPT_FILES, sweepStep } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { serverTimeMs } from '../../lib/redis/queries.js'
import { GUARD_CODE, GUARD_PROLOGUE, keyGuard, scriptSource, useGuardedQueue } from '../helpers/key-guard.js'
import { captureLogs } from '../helpers/log-lines.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const FILES: string[] = Object.values(SCRIPT_FILES)
const GUARD_ERROR = new RegExp(GUARD_CODE)

const keys = queueKeys('emq', 'q')
const { redis, fx } = useGuardedQueue()
afterEach(() => vi.restoreAllMocks())
const worker = fx.worker

/** Every script file ran under the guard: the guarded source's SHA is in Redis's script cache. */
async function expectGuardedScriptsRan(files: string[]): Promise<void> {
  const shas = files.map((f) => loadScript(f).sha)
  expect(await redis.client.script('EXISTS', ...shas)).toEqual(files.map(() => 1))
}

describe('the guard is installed', () => {
  it('every script is wrapped by the guard before it is hashed', () => {
    for (const file of FILES) {
      const script = loadScript(file)
      expect(script.lua.startsWith(GUARD_PROLOGUE)).toBe(true)
      expect(script.lua.slice(GUARD_PROLOGUE.length)).toBe(scriptSource(file))
      expect(script.sha).toBe(createHash('sha1').update(script.lua).digest('hex'))
    }
  })
})

describe('the whole flow under the guard', () => {
  it('add, take, heartbeat renewals on a short lease, complete', async () => {
    const releases = new Map<string, () => void>()
    const w = worker((job) => new Promise((resolve) => releases.set(job.id, () => resolve({ done: job.id }))))
    const active = nextEvent<[Job]>(w, 'active')
    await fx.queue.add('send', { to: 'x' }, { jobId: 'a' })
    await active
    const firstDeadline = Number(await redis.client.zscore(keys.active, 'a'))

    await waitFor(async () => Number(await redis.client.zscore(keys.active, 'a')) > firstDeadline + 600, {
      what: 'renewals past two leases',
    })
    const completed = nextEvent(w, 'completed')
    releases.get('a')?.()
    await completed

    expect(await fx.queue.getJob('a')).toMatchObject({ state: 'completed', attemptsMade: 1, returnValue: { done: 'a' } })
    expect(await fx.queue.counts()).toEqual({ wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 1, failed: 0 })
    expect((await fx.queue.add('send', {}, { jobId: 'a' })).state).toBe('completed') // an existing id: add changes nothing
    await expectGuardedScriptsRan([SCRIPT_FILES.add, SCRIPT_FILES.take, SCRIPT_FILES.extend, SCRIPT_FILES.finish])
  })

  it('short jobs on a backlog for two workers: reservations, the job in hand read then taken as it starts, takes that reserve in place of candidates the other got', async () => {
    await fx.queue.addBulk(
      Array.from({ length: 200 }, (_, i) => ({ name: 'x', data: { i }, opts: i % 2 ? { priority: 1 + (i % 3) } : {} })),
    )
    let done = 0
    const quick = () => new Promise<void>((resolve) => setTimeout(resolve, 1)).then(() => void done++)
    const [a, b] = [worker(quick, { concurrency: 2 }), worker(quick, { concurrency: 2 })]
    await waitFor(() => done === 200, { what: 'the backlog run' })
    await Promise.all([a.close(), b.close()])
    expect(await fx.queue.counts()).toMatchObject({ wait: 0, prioritized: 0, active: 0, completed: 200 })
    expect(await redis.client.exists(keys.reserved, keys.reservedScores)).toBe(0)
    await expectGuardedScriptsRan([SCRIPT_FILES.take, SCRIPT_FILES.finish])
  })

  it('fail and retry, then fail at the last attempt', async () => {
    const runs = new Map<string, number>()
    const failed: [string, string][] = []
    const w = worker(
      (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
        if (job.id === 'never' || runs.get(job.id) === 1) throw new Error(`boom ${job.id}`)
        return 'ok'
      },
      { concurrency: 2 },
    )
    w.on('failed', (job: Job) => failed.push([job.id, job.state]))
    await fx.queue.add('job', {}, { jobId: 'retry', attempts: 2 })
    await fx.queue.add('job', {}, { jobId: 'never', attempts: 2 })

    await waitFor(async () => (await fx.queue.counts()).completed === 1 && (await fx.queue.counts()).failed === 1, {
      what: 'one completed and one failed',
    })

    expect(await fx.queue.getJob('retry')).toMatchObject({ state: 'completed', attemptsMade: 2, lastError: 'boom retry' })
    expect(await fx.queue.getJob('never')).toMatchObject({ state: 'failed', attemptsMade: 2, failedReason: 'boom never' })
    expect(failed.sort()).toEqual([
      ['never', 'failed'],
      ['never', 'wait'],
      ['retry', 'wait'],
    ])
  })

  it('close() past closeTimeout returns the running job to wait without using an attempt; another worker completes it', async () => {
    const first = worker(
      (_job, _token, signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      {
        closeTimeout: 50,
      },
    )
    const active = nextEvent(first, 'active')
    await fx.queue.add('job', {}, { jobId: 'c' })
    await active
    await first.close()

    expect(await fx.queue.getJob('c')).toMatchObject({ state: 'wait', attemptsMade: 0, attemptsStarted: 1 })
    const second = worker(() => 'done')
    await nextEvent(second, 'completed')
    expect(await fx.queue.getJob('c')).toMatchObject({ state: 'completed', attemptsMade: 1, attemptsStarted: 2 })
  })

  it('a lapsed lease is taken back by the next heartbeat; after a sweep recovers the job the heartbeat reports it lost and the finish is fenced', async () => {
    const clock = new ManualClock()
    const lost: string[] = []
    const w = worker((_job, _token, signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))), {
      clock,
      lockDuration: 200,
      heartbeatInterval: 100,
      closeTimeout: 50,
    })
    w.on('lockLost', (job: Job) => lost.push(job.id))
    const active = nextEvent(w, 'active')
    await fx.queue.add('job', {}, { jobId: 'p', attempts: 3 })
    await active
    const token = await redis.client.get(keys.lock('p'))

    // The worker "pauses" (its clock stands still) past the lease; nobody recovered the job: code 2.
    await waitFor(async () => (await redis.client.exists(keys.lock('p'))) === 0, { what: 'lease to lapse' })
    await clock.advance(100)
    await waitFor(async () => (await redis.client.get(keys.lock('p'))) === token, { what: 'the lapsed lease to be taken back' })
    expect(lost).toEqual([])

    // Lapses again; two sweeps recover it; the next heartbeat gets code 0 and the run's finish is 'lost'.
    await waitFor(async () => (await redis.client.exists(keys.lock('p'))) === 0, { what: 'lease to lapse again' })
    expect((await sweep(redis.client, 'q', { graceMs: 0 })).marked).toEqual(['p'])
    expect((await sweep(redis.client, 'q', { graceMs: 0 })).recovered).toEqual(['p'])
    const lockLost = nextEvent(w, 'lockLost')
    await clock.advance(100)
    await lockLost

    // The aborted run's finish is fenced ('lost'); only then does the worker take the recovered job again.
    const again = await waitFor(async () => ((await fx.queue.getJob('p'))?.attemptsStarted === 2 ? fx.queue.getJob('p') : undefined), {
      what: 'the recovered job to be taken again',
    })
    expect(again).toMatchObject({ state: 'active', attemptsMade: 0, stalledCounter: 1 })
    expect(lost).toEqual(['p'])
    // close() waits closeTimeout by the worker's clock: move it until close returns the second run to wait.
    let closed = false
    void w.close().then(() => (closed = true))
    await waitFor(
      async () => {
        await clock.advance(60)
        return closed
      },
      { what: 'close() with a manual clock' },
    )
    expect(await fx.queue.getJob('p')).toMatchObject({ state: 'wait', attemptsMade: 0, attemptsStarted: 2 })
    const { add, take, extend, reclaim, finish, probe, sweepStep } = SCRIPT_FILES
    await expectGuardedScriptsRan([add, take, extend, reclaim, finish, probe, sweepStep])
  })

  it("sweep(): a crashed worker's jobs are marked, recovered, and failed past their stall allowance (several script steps)", async () => {
    const ids = await crashedJobs(redis.client, 'q', 5, { attempts: 3 })
    const lastIds = await stalledBefore(await crashedJobs(redis.client, 'last', 2, { attempts: 1 }))

    const mark = await sweep(redis.url, 'q', { limit: 2, graceMs: 0 })
    const recover = await sweep(redis.url, 'q', { limit: 2, graceMs: 0 })
    await sweep(redis.url, 'last', { graceMs: 0 })
    const fail = await sweep(redis.url, 'last', { graceMs: 0 })

    expect(mark.marked.sort()).toEqual([...ids].sort())
    expect(recover.recovered.sort()).toEqual([...ids].sort())
    for (const id of ids) expect(await fx.queue.getJob(id)).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1 })
    expect(fail).toEqual({ marked: [], recovered: [], failed: [...lastIds].sort() })
    // direct: a second queue name, read once (the fixture makes one queue)
    const last = new Queue('last', { connection: redis.client })
    expect(await last.getJob('j0')).toMatchObject({ state: 'failed', failedReason: expect.stringMatching(/stalled/) })
    expect(await last.counts()).toEqual({ wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 2 })
    await expectGuardedScriptsRan([SCRIPT_FILES.add, SCRIPT_FILES.take, SCRIPT_FILES.probe, SCRIPT_FILES.sweepStep])
  })

  it('a delayed job, a retry in backoff, retention trims, a redrive and a removal', async () => {
    // direct: a second Queue object of the queue, with its own retention defaults (under the guard)
    const q = new Queue('q', {
      connection: redis.client,
      defaultJobOptions: { removeOnComplete: { count: 2 }, removeOnFail: { count: 1 } },
    })
    const completed: string[] = []
    const w = worker((job) => {
      if (job.name === 'flaky' && job.attemptsStarted === 1) throw new Error('first run fails')
      if (job.name === 'bad') throw new Error('always fails')
      return 'ok'
    })
    w.on('completed', (job: Job) => completed.push(job.id))
    await q.add('later', {}, { jobId: 'd1', delay: 100 })
    await q.add('flaky', {}, { jobId: 'f1', attempts: 2, backoff: { type: 'exponential', delay: 50 } })
    for (let i = 0; i < 14; i++) await q.add('job', {}, { jobId: `c${i}` })
    for (const id of ['b1', 'b2']) await q.add('bad', {}, { jobId: id, attempts: 1 })

    await waitFor(() => completed.includes('d1') && completed.includes('f1') && completed.length === 16, { what: '16 completions' })
    await waitFor(async () => (await q.counts()).failed >= 1, { what: 'a failure' })
    await sweep(redis.client, 'q', { graceMs: 0 })

    expect(await q.counts()).toMatchObject({ completed: 2, failed: 1, wait: 0, delayed: 0 })
    const [failed] = await q.getJobs('failed')
    expect(await q.retryJobs({ ids: [failed?.id as string] })).toEqual([failed?.id])
    await waitFor(async () => (await q.counts()).failed === 1 && (await q.getJob(failed?.id as string))?.retried === 1, {
      what: 'the redrive to fail again',
    })
    expect(await q.remove(failed?.id as string)).toBe(1)
    expect(await q.getJob(failed?.id as string)).toBeUndefined()
    const { add, take, finish, probe, promote, trim, retry, remove } = SCRIPT_FILES
    await expectGuardedScriptsRan([add, take, finish, probe, promote, trim, retry, remove])
  })

  it('the everyday features: events with a listener, progress, logs, pause, addBulk, drain, clean, obliterate', async () => {
    const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
    await events.waitUntilReady()
    try {
      const completed = nextEvent<[{ jobId: string }]>(events, 'completed')
      const w = worker(async (job) => {
        await job.updateProgress(50)
        await job.log('half way')
        return 'ok'
      })
      await fx.queue.add('x', {}, { jobId: 'p', keepLogs: 5 })
      expect((await completed)[0].jobId).toBe('p')
      expect(await fx.queue.getJobLogs('p')).toEqual({ logs: ['half way'], count: 1 })
      await w.close()
      await fx.queue.pause()
      await fx.queue.addBulk([1, 2, 3].map((i) => ({ name: 'b', data: { i } })))
      await fx.queue.add('x', {}, { delay: 60_000 })
      await fx.queue.resume()
      await fx.queue.drain(true)
      expect(await fx.queue.clean(0, 0)).toEqual(['p'])
      await fx.queue.add('x', {})
      await fx.queue.obliterate()
      expect(await fx.queue.counts()).toEqual({ wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 0 })
    } finally {
      await events.close()
    }
    await expectGuardedScriptsRan([
      SCRIPT_FILES.progress,
      SCRIPT_FILES.log,
      SCRIPT_FILES.pause,
      SCRIPT_FILES.drain,
      SCRIPT_FILES.clean,
      SCRIPT_FILES.obliterate,
    ])
  })

  it('priorities, a limiter, rateLimit and a job scheduler made and advanced by worker and sweep', async () => {
    const runs: string[] = []
    // Both are waiting before the worker starts: an idle worker would take 'low' the moment it is added.
    await fx.queue.add('x', {}, { jobId: 'low', priority: 5 })
    await fx.queue.add('x', {}, { jobId: 'high', priority: 1 })
    const w = worker((job) => void runs.push(job.id), { limiter: { max: 50, duration: 1_000 } })
    await fx.queue.rateLimit(1)
    await fx.queue.upsertJobScheduler('every', { every: 100 })
    await waitFor(() => runs.filter((id) => id.startsWith('repeat:')).length >= 3, { what: 'three iterations run' })
    await sweep(redis.client, 'q', { graceMs: 0 })
    expect(runs.indexOf('high')).toBeLessThan(runs.indexOf('low'))
    expect(await fx.queue.removeJobScheduler('every')).toBe(true)
    await w.close()
    await expectGuardedScriptsRan([SCRIPT_FILES.limit, SCRIPT_FILES.schedule, SCRIPT_FILES.iterate, SCRIPT_FILES.unschedule])
  })

  it('a job scheduler with no worker caught up by one sweep, then removed with its newest run out of a reservation', async () => {
    await fx.queue.upsertJobScheduler('behind', { every: 20 }, { opts: { priority: 2 } })
    const [first] = await redis.client.zrange(keys.prioritized, '0', '0')
    await waitFor(async () => (await serverTimeMs(redis.client)) >= Number(first?.split(':')[2]) + 200, { intervalMs: 5 })
    await sweep(redis.client, 'q', { graceMs: 0 })
    const runs = await redis.client.zrange(keys.prioritized, '0', '-1')
    expect(runs.length).toBeGreaterThanOrEqual(10)
    // A busy worker reserved the newest one.
    const newest = runs.at(-1) as string
    await redis.client.hset(keys.reservedScores, newest, String(await redis.client.zscore(keys.prioritized, newest)))
    await redis.client.zrem(keys.prioritized, newest)
    await redis.client.zadd(keys.reserved, (await serverTimeMs(redis.client)) + 60_000, newest)
    expect(await fx.queue.removeJobScheduler('behind')).toBe(true)
    expect(await fx.queue.getJob(newest)).toBeUndefined()
    await expectGuardedScriptsRan([SCRIPT_FILES.schedule, SCRIPT_FILES.probe, SCRIPT_FILES.iterate, SCRIPT_FILES.unschedule])
  })

  it('promoteJob: a job delayed an hour is promoted now (a prioritized one to its priority); a job not delayed is refused', async () => {
    await fx.queue.add('later', {}, { jobId: 'd', delay: 3_600_000 })
    await fx.queue.add('later', {}, { jobId: 'p', delay: 3_600_000, priority: 3 })
    await fx.queue.add('now', {}, { jobId: 'w' })
    await fx.queue.promoteJob('d')
    await fx.queue.promoteJob('p')
    expect((await fx.queue.getJob('d'))?.state).toBe('wait')
    expect((await fx.queue.getJob('p'))?.state).toBe('prioritized')
    await expect(fx.queue.promoteJob('w')).rejects.toMatchObject({ code: 'ERR_JOB_STATE' })
    await expectGuardedScriptsRan([SCRIPT_FILES.promoteJob])
  })

  it('the Lambda handler marks on one invocation and recovers on the next', async () => {
    const logs = captureLogs()
    await crashedJobs(redis.client, 'q', 3)
    const handler = createHandler({ REDIS_URL: redis.url, METRICS_MODE: 'off', IS_LOCAL: 'true', SWEEP_GRACE_MS: '0' })

    const first = await handler({}, { getRemainingTimeInMillis: () => 50_000 })
    const second = await handler({}, { getRemainingTimeInMillis: () => 50_000 })

    expect(first).toEqual({ sweeps: 1, queues: { q: { marked: 3, recovered: 0, failed: 0 } } })
    expect(second).toEqual({ sweeps: 1, queues: { q: { marked: 0, recovered: 3, failed: 0 } } })
    // The handler's lines were captured (the check below is not vacuous), and none names the guard.
    expect(logs.line('summary')).toBeDefined()
    expect(logs.text.join('\n')).not.toMatch(GUARD_ERROR)
  })

  it('a Lambda handler that publishes claims the failed jobs, then settles its claim', async () => {
    const logs = captureLogs()
    await stalledBefore(await crashedJobs(redis.client, 'last', 2, { attempts: 1 }))
    const env = { REDIS_URL: redis.url, METRICS_MODE: 'emf', IS_LOCAL: 'true', SWEEP_GRACE_MS: '0' }
    const handler = createHandler({ ...env, SWEEPS_PER_INVOCATION: '2', SWEEP_INTERVAL_MS: '10' })
    try {
      await handler({}, { getRemainingTimeInMillis: () => 50_000 })
    } finally {
      await handler.close()
    }

    expect(logs.line('queue')).toMatchObject({ queue: 'last', failed: 2, failedNew: 2 })
    expect(logs.text.join('\n')).not.toMatch(GUARD_ERROR)
    await expectGuardedScriptsRan([SCRIPT_FILES.claim, SCRIPT_FILES.settle])
  })
})

/** Jobs of queue 'last' that stalled once before: their next stall fails them (maxStalledCount 1). */
async function stalledBefore(ids: string[]): Promise<string[]> {
  for (const id of ids) await redis.client.hset(queueKeys('emq', 'last').job(id), 'stalledCounter', '1')
  return ids
}

describe('the guard fires', () => {
  // Made-up scripts, run straight through the client: they are probes of the guard, not EchoMQ commands.
  const evalGuarded = (body: string, keys: string[], args: (string | number)[] = []) =>
    redis.client.eval(keyGuard(body), keys.length, ...keys, ...args)

  it.each([
    [
      'a key not in KEYS, through the rcall alias',
      "local rcall = redis.call\nrcall('SET', KEYS[1], 'v')\nreturn rcall('SET', 'emq:{q}:undeclared', 'v')",
      /SET touches key emq:\{q\}:undeclared which is not in KEYS/,
    ],
    ['a key not in KEYS, through redis.pcall', "return redis.pcall('HGET', 'emq:{q}:other', 'f')", /HGET touches key emq:\{q\}:other/],
    [
      'a multi-key command with one undeclared key',
      "return redis.call('DEL', KEYS[1], 'emq:{q}:undeclared')",
      /DEL touches key emq:\{q\}:undeclared/,
    ],
    ['a command the guard does not classify', "return redis.call('FLUSHALL')", /command FLUSHALL is not known to the key guard/],
    ['a keyed command with no key', "return redis.call('GET')", /GET without a key/],
  ])('%s', async (_label, body, message) => {
    await redis.client.set('emq:{q}:undeclared', 'before')
    await redis.client.set('emq:{q}:k', 'before')

    const err = await evalGuarded(body, ['emq:{q}:k']).catch((e: unknown) => e)

    expect(err).toBeInstanceOf(Error)
    expect((err as Error).message).toMatch(GUARD_ERROR)
    expect((err as Error).message).toMatch(message)
    expect(await redis.client.get('emq:{q}:undeclared')).toBe('before')
    expect((await redis.client.keys('emq:{q}:*')).sort()).toEqual(['emq:{q}:k', 'emq:{q}:undeclared'])
  })

  it('the same script passes when the key is declared (the guard is not just failing everything)', async () => {
    expect(
      await evalGuarded("redis.call('SET', KEYS[2], 'v')\nreturn redis.call('EXISTS', KEYS[1], KEYS[2])", ['emq:{q}:a', 'emq:{q}:b']),
    ).toBe(1)
  })

  it('a script run with no KEYS fails in Redis', async () => {
    await expect(evalGuarded("return redis.call('TIME')", [])).rejects.toThrow(/EMQGUARD script run with no KEYS/)
  })

  it('a modified sweep-11.lua that marks into an undeclared key is stopped by the guard and changes nothing', async () => {
    await crashedJobs(redis.client, 'q', 1)
    const source = scriptSource(SCRIPT_FILES.sweepStep)
    const modified = source.replace(
      "rcall('ZADD', stalledKey, unpack(members))",
      "rcall('ZADD', 'emq:{q}:stalled-elsewhere', unpack(members))",
    )
    expect(modified).not.toBe(source)
    const ids = await redis.client.zrange(keys.active, '0', '-1')
    const stepKeys = [
      keys.active,
      keys.stalled,
      keys.wait,
      keys.failed,
      keys.marker,
      keys.meta,
      keys.events,
      keys.listened,
      keys.metrics,
      keys.prioritized,
      keys.handoffs,
      ...ids.flatMap((id) => [keys.job(id), keys.lock(id), keys.logs(id)]),
    ]

    const err = await redis.client
      .eval(keyGuard(modified), stepKeys.length, ...stepKeys, 0, 'deadline', 0, 0, ...ids)
      .catch((e: unknown) => e)

    expect((err as Error).message).toMatch(/EMQGUARD ZADD touches key emq:\{q\}:stalled-elsewhere/)
    expect(await redis.client.exists('emq:{q}:stalled-elsewhere', keys.stalled)).toBe(0)
    // The unmodified script, same keys and arguments, is accepted by the guard.
    expect(await sweepStep(redis.client, keys, { graceMs: 0, mode: 'deadline', ids })).toEqual({
      handoffs: [],
      marked: ids,
      recovered: [],
      failed: [],
      left: 1,
      done: false,
      trimFailed: false,
      next: [],
      firstRecoveredDeadline: undefined,
      failedJobs: [],
    })
  })
})
