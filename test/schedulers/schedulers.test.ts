/**
 * Job schedulers on a real Redis: BullMQ's API and shapes, runs made by whoever advances the schedule (a
 * worker or the sweep, so a schedule runs with no worker), deterministic ids (two producers never make one
 * twice), limit and endDate, upserts that change a schedule without duplicating a run, removal, missed
 * periods skipped, a stepped wall clock, bad input refused with nothing written; the timing's arithmetic
 * (cron in a time zone across DST) without Redis. Catching up and BullMQ's count of pending runs:
 * schedulers-catch-up.test.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { type Job, QueueEvents, sweep } from '../../lib/index.js'
import { iterationId } from '../../lib/redis/commands.js'
import { serverTimeMs } from '../../lib/redis/queries.js'
import { startedRun } from '../../lib/schedulers/iterations.js'
import { CATCH_UP_MAX_RUNS, CATCH_UP_MS, duePeriods, firstDue, successorDue, timing } from '../../lib/schedulers/timing.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

afterEach(() => {
  vi.restoreAllMocks()
})

/** The iterations of scheduler `sid` that exist (any state), by due time. */
async function iterations(sid: string): Promise<number[]> {
  const ids = await redis.client.keys(`emq:{q}:repeat:${sid}:*`)
  return ids
    .filter((k) => !k.endsWith(':lock') && !k.endsWith(':logs'))
    .map((k) => Number(k.slice(k.lastIndexOf(':') + 1)))
    .sort((a, b) => a - b)
}

describe('upsertJobScheduler', () => {
  it('an every schedule runs at once: the first run is waiting, the next one made when a worker starts it', async () => {
    const job = await fx.queue.upsertJobScheduler('tick', { every: 60_000 }, { name: 'beat', data: { n: 1 }, opts: { attempts: 2 } })
    const scheduler = await fx.queue.getJobScheduler('tick')

    expect(job).toMatchObject({ name: 'beat', data: { n: 1 }, attempts: 2, state: 'wait', repeatJobKey: 'tick' })
    expect(job?.id).toMatch(/^repeat:tick:\d+$/)
    const first = Number(job?.id.split(':')[2])
    expect(scheduler).toEqual({
      key: 'tick',
      name: 'beat',
      next: first + 60_000,
      iterationCount: 1,
      every: 60_000,
      offset: 0,
      template: { data: { n: 1 }, opts: { attempts: 2 } },
    })
    // One run pending, as BullMQ's: the next is made when a worker starts this one.
    expect(await fx.queue.getJob(iterationId('tick', first + 60_000))).toBeUndefined()
    await startedRun(redis.client, fx.keys, job?.id as string)
    expect(await fx.queue.getJob(iterationId('tick', first + 60_000))).toMatchObject({ state: 'delayed', dueAt: first + 60_000 })
    expect(await fx.queue.getJobScheduler('tick')).toMatchObject({ next: first + 60_000, iterationCount: 2 })
  })

  it('a worker is given the run with its repeatJobKey, as BullMQ\u2019s processor sees it; a plain job has none', async () => {
    const seen: (string | undefined)[] = []
    fx.worker((j) => {
      seen.push(j.repeatJobKey)
    })
    await fx.queue.add('plain', {})
    await waitFor(() => seen.length === 1, { what: 'the plain job run' })
    await fx.queue.upsertJobScheduler('keyed', { every: 60_000 }, { name: 'beat' })
    await waitFor(() => seen.length === 2, { what: 'the first run run' })
    expect(seen).toEqual([undefined, 'keyed'])
  })

  it('a cron pattern in a time zone: the first iteration delayed to the next occurrence; BullMQ 6 shape', async () => {
    const job = await fx.queue.upsertJobScheduler('nightly', { pattern: '0 30 2 * * *', tz: 'Europe/Paris' })
    const scheduler = await fx.queue.getJobScheduler('nightly')

    expect(job?.state).toBe('delayed')
    expect(scheduler).toMatchObject({
      key: 'nightly',
      name: 'nightly',
      pattern: '0 30 2 * * *',
      tz: 'Europe/Paris',
      iterationCount: 1,
      offset: 0,
    })
    const when = new Date(scheduler?.next as number)
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', timeStyle: 'medium' }).format(when)).toBe('02:30:00')
    expect(await fx.queue.getJobSchedulers()).toHaveLength(1)
    expect(await fx.queue.getJobScheduler('none')).toBeUndefined()
  })

  it('upserting the same timing keeps the pending run (new template); a new timing replaces it', async () => {
    await fx.queue.upsertJobScheduler('s', { every: 60_000 }, { data: { v: 1 } })
    const before = await iterations('s')
    const kept = await fx.queue.upsertJobScheduler('s', { every: 60_000 }, { data: { v: 2 } })
    const pending = await fx.queue.getJob(iterationId('s', before[0] as number))

    expect(before).toHaveLength(1)
    expect(await iterations('s')).toEqual(before)
    expect(pending?.data).toEqual({ v: 2 })
    expect(kept?.id).toBe(pending?.id)

    const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
    await events.waitUntilReady()
    const removed: unknown[] = []
    events.on('removed', (payload: unknown) => removed.push(payload))
    await fx.queue.upsertJobScheduler('s', { every: 30_000 }, { data: { v: 3 } })
    await waitFor(() => removed.length === 1, { what: 'the replaced iteration removed' })
    await events.close()

    expect(removed).toEqual([{ jobId: iterationId('s', before[0] as number), prev: 'wait' }])
    expect(await fx.queue.getJobScheduler('s')).toMatchObject({ every: 30_000, template: { data: { v: 3 } } })
    expect(await fx.queue.getJobSchedulers(0, -1)).toHaveLength(1)
  })

  it('refuses bad input with ERR_OPTIONS, and writes nothing', async () => {
    const before = await snapshot(redis.client)
    for (const repeat of [
      { every: 0 },
      { every: -5 },
      { every: 1.5 },
      { pattern: 'every minute' },
      { pattern: '* * * * *', tz: 'Mars/Olympus' },
      { every: 1000, pattern: '* * * * *' },
      {},
      { every: 1000, limit: 0 },
      { every: 1000, endDate: 'not a date' },
      { every: 1000, startDate: Date.now() + 10_000, endDate: Date.now() },
      { pattern: '* * * * *', immediately: true, startDate: Date.now() },
      { every: 1000, evry: 5 },
    ]) {
      await expect(fx.queue.upsertJobScheduler('bad', repeat as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    }
    await expect(fx.queue.upsertJobScheduler('bad', { every: 1000 }, { opts: { jobId: 'x' } } as never)).rejects.toMatchObject({
      code: 'ERR_OPTIONS',
    })
    await expect(fx.queue.upsertJobScheduler('bad', { every: 1000 }, { opts: { priority: -1 } })).rejects.toMatchObject({
      code: 'ERR_OPTIONS',
    })
    await expect(fx.queue.upsertJobScheduler('bad:id', { every: 1000 })).rejects.toMatchObject({ code: 'ERR_JOB_ID' })
    await expect(fx.queue.upsertJobScheduler('late', { every: 1000, endDate: Date.now() - 1000 })).rejects.toMatchObject({
      code: 'ERR_OPTIONS',
    })
    expect(await snapshot(redis.client)).toEqual(before)
  })
})

describe('iterations', () => {
  it('with no worker, the sweep makes them: due iterations pile up in wait, one per period', async () => {
    await fx.queue.upsertJobScheduler('beat', { every: 150 })
    const start = performance.now()
    await waitFor(
      async () => {
        await sweep(redis.client, 'q')
        return performance.now() - start > 700
      },
      { intervalMs: 100 },
    )
    await sweep(redis.client, 'q')
    const waiting = (await fx.queue.getJobs('wait', { start: 0, end: 99 })).map((j) => j.id)
    const dues = waiting.map((id) => Number(id.split(':')[2])).sort((a, b) => a - b)

    expect(dues.length).toBeGreaterThanOrEqual(4)
    expect(dues.slice(1).map((d, i) => d - (dues[i] as number))).toEqual(dues.slice(1).map(() => 150))
    expect((await fx.queue.counts()).wait).toBe(dues.length)
  })

  it('periods missed while nothing ran are skipped, not replayed', async () => {
    // A scheduler whose next run (made when a worker started the first) fell due an hour ago: no worker
    // and no sweep ran since.
    const first = await fx.queue.upsertJobScheduler('hourly-late', { every: 60_000 })
    await startedRun(redis.client, fx.keys, first?.id as string)
    const [, pending] = await iterations('hourly-late')
    const hourAgo = (pending as number) - 3_660_000
    await redis.client.rename(fx.keys.job(iterationId('hourly-late', pending as number)), fx.keys.job(iterationId('hourly-late', hourAgo)))
    await redis.client.zrem(fx.keys.delayed, iterationId('hourly-late', pending as number))
    await redis.client.zadd(fx.keys.delayed, hourAgo, iterationId('hourly-late', hourAgo))
    await redis.client.zadd(fx.keys.schedulers, hourAgo, 'hourly-late')
    await redis.client.hset(fx.keys.scheduler('hourly-late'), 'last', hourAgo)

    await sweep(redis.client, 'q')
    const now = await serverTimeMs(redis.client)

    // The late one, then only the periods of the last CATCH_UP_MS (5 or 6 of them; the first is one).
    const waiting = (await fx.queue.getJobs('wait', { start: 0, end: 99 })).map((j) => Number(j.id.split(':')[2]))
    const caughtUp = waiting.filter((due) => due !== hourAgo)
    expect(waiting).toContain(hourAgo)
    expect(caughtUp).toContain(Number(first?.id.split(':')[2]))
    expect(caughtUp.length).toBeGreaterThanOrEqual(CATCH_UP_MS / 60_000)
    expect(caughtUp.length).toBeLessThanOrEqual(CATCH_UP_MS / 60_000 + 1)
    expect(Math.min(...caughtUp)).toBeGreaterThanOrEqual(now - CATCH_UP_MS)
    expect(await fx.queue.counts()).toMatchObject({ delayed: 0 })
  })

  it('workers and sweeps together never make an iteration twice nor skip one; a stepped wall clock changes nothing', async () => {
    const runs: string[] = []
    fx.worker((job: Job) => void runs.push(job.id))
    fx.worker((job: Job) => void runs.push(job.id))
    await fx.queue.upsertJobScheduler('both', { every: 100 })
    // The wall clock of this process jumps an hour ahead: schedules go by Redis's clock.
    const real = Date.now
    vi.spyOn(Date, 'now').mockImplementation(() => real() + 3_600_000)
    const start = performance.now()
    while (performance.now() - start < 1_200) {
      await Promise.all([sweep(redis.client, 'q'), sweep(redis.client, 'q')])
      await new Promise((resolve) => setTimeout(resolve, 40))
    }
    vi.restoreAllMocks()
    await waitFor(async () => (await fx.queue.counts()).wait === 0, { what: 'the due ones run' })

    const dues = runs.map((id) => Number(id.split(':')[2])).sort((a, b) => a - b)
    expect(new Set(runs).size).toBe(runs.length)
    expect(dues.length).toBeGreaterThanOrEqual(8)
    expect(dues.slice(1).map((d, i) => d - (dues[i] as number))).toEqual(dues.slice(1).map(() => 100))
    const scheduler = await fx.queue.getJobScheduler('both')
    expect(scheduler?.iterationCount).toBe((await iterations('both')).length)
  })

  it('limit and endDate end the schedule: the scheduler is gone after its last iteration', async () => {
    fx.worker(() => 'ok')
    await fx.queue.upsertJobScheduler('three', { every: 50, limit: 3 })
    await fx.queue.upsertJobScheduler('short', { every: 50, endDate: Date.now() + 220 })
    await waitFor(async () => (await fx.queue.getJobSchedulers()).length === 0, { what: 'both schedules ended' })
    await waitFor(async () => (await fx.queue.counts()).wait + (await fx.queue.counts()).delayed === 0, { what: 'all run' })

    expect(await iterations('three')).toHaveLength(3)
    expect((await iterations('short')).length).toBeGreaterThanOrEqual(3)
    expect((await iterations('short')).length).toBeLessThanOrEqual(6)
  })

  it('an iteration is a job like any other: a failure is retried after its backoff', async () => {
    let calls = 0
    fx.worker(() => {
      if (calls++ === 0) throw new Error('first run fails')
    })
    const first = await fx.queue.upsertJobScheduler('retry', { every: 60_000 }, { opts: { attempts: 2, backoff: 50 } })
    await waitFor(async () => (await fx.queue.getJob(first?.id as string))?.state === 'completed', { what: 'retried and done' })
    expect(await fx.queue.getJob(first?.id as string)).toMatchObject({ attemptsMade: 2, lastError: 'first run fails' })
  })
})

describe('removeJobScheduler', () => {
  it('removes the scheduler and its newest run if no worker started it; older runs stay; false for none', async () => {
    // Four periods with no worker: the sweep made them all; the newest is the one pending.
    await fx.queue.upsertJobScheduler('gone', { every: 100 })
    const [first] = await iterations('gone')
    await waitFor(async () => (await serverTimeMs(redis.client)) >= (first as number) + 300, { intervalMs: 5 })
    await sweep(redis.client, 'q')
    const made = await iterations('gone')

    expect(made.length).toBeGreaterThanOrEqual(4)
    expect(await fx.queue.removeJobScheduler('gone')).toBe(true)
    expect(await fx.queue.getJobScheduler('gone')).toBeUndefined()
    // A backlog older than the newest run: due jobs like any other, they stay.
    expect(await iterations('gone')).toEqual(made.slice(0, -1))
    expect(await fx.queue.removeJobScheduler('gone')).toBe(false)
  })

  it('leaves its newest run that joined a flow (a child added under it) as a job like any other', async () => {
    await fx.queue.upsertJobScheduler('fam', { every: 60_000, startDate: Date.now() + 60_000 })
    const [due] = await iterations('fam')
    const id = iterationId('fam', due as number)
    await fx.queue.add('c', {}, { parent: { id, queue: fx.queue.qualifiedName } })
    expect(await fx.queue.removeJobScheduler('fam')).toBe(true)
    expect(await fx.queue.getJobState(id)).toBe('delayed')
    expect(await (await fx.queue.getJob(id))?.getDependenciesCount()).toMatchObject({ unprocessed: 1 })
  })
})

describe('the timing, without Redis', () => {
  const at = (iso: string) => Date.parse(iso)

  it('cron in a time zone across the spring DST change: 02:30 does not exist, so 03:30 local', () => {
    const t = timing({ pattern: '0 30 2 * * *', tz: 'America/New_York' })
    const first = firstDue(t, at('2026-03-08T05:00:00Z')) as number
    expect(new Date(first).toISOString()).toBe('2026-03-08T07:30:00.000Z')
    const next = successorDue(t, first) as number
    expect(new Date(next).toISOString()).toBe('2026-03-09T06:30:00.000Z')
  })

  it('an every schedule: at once, aligned with offset, after startDate; the next period, none past endDate', () => {
    const now = at('2026-01-01T00:00:10Z')
    expect(firstDue(timing({ every: 60_000 }), now)).toBe(now)
    expect(firstDue(timing({ every: 60_000, offset: 5_000 }), now)).toBe(at('2026-01-01T00:01:05Z'))
    expect(firstDue(timing({ every: 60_000, startDate: now + 30_000 }), now)).toBe(now + 30_000)
    expect(successorDue(timing({ every: 60_000 }), now)).toBe(now + 60_000)
    expect(successorDue(timing({ every: 60_000, endDate: now + 1 }), now)).toBeUndefined()
  })

  it('the periods due: none ahead of time, every one since (oldest first), none before the catch-up limit', () => {
    const now = at('2026-01-01T00:10:00Z')
    const minute = timing({ every: 60_000 })
    expect(duePeriods(minute, now + 1, now)).toEqual({ due: [], after: now + 1 })
    expect(duePeriods(minute, now - 120_000, now)).toEqual({ due: [now - 120_000, now - 60_000, now], after: now + 60_000 })
    // An hour late: the periods of the last CATCH_UP_MS only, and the next one after now.
    const hourLate = duePeriods(minute, now - 3_600_000 + 7, now)
    expect(hourLate.due[0]).toBeGreaterThanOrEqual(now - CATCH_UP_MS)
    expect(hourLate.due).toHaveLength(CATCH_UP_MS / 60_000)
    expect(hourLate.after).toBe((hourLate.due.at(-1) as number) + 60_000)
    // A fast schedule: the newest CATCH_UP_MAX_RUNS.
    const fast = duePeriods(timing({ every: 5 }), now - 60_000, now)
    expect(fast.due).toHaveLength(CATCH_UP_MAX_RUNS)
    expect(fast.due.at(-1)).toBe(now)
    // Past endDate: nothing after it.
    expect(duePeriods(timing({ every: 60_000, endDate: now - 30_000 }), now - 120_000, now)).toEqual({
      due: [now - 120_000, now - 60_000],
      after: undefined,
    })
    // A cron every 20 s, two minutes late: seven periods, on the pattern's seconds.
    const cron = duePeriods(timing({ pattern: '*/20 * * * * *' }), now - 120_000, now)
    expect(cron.due).toEqual([120, 100, 80, 60, 40, 20, 0].map((s) => now - s * 1000))
    expect(cron.after).toBe(now + 20_000)
  })
})

it('refusals BullMQ programs match on carry BullMQ\u2019s words, with ERR_OPTIONS', async () => {
  const refusals: [() => Promise<unknown>, string][] = [
    [
      () => fx.queue.upsertJobScheduler('r', { every: 5_000, pattern: '* * * * *' }),
      'Both .pattern and .every options are defined for this repeatable job',
    ],
    [() => fx.queue.upsertJobScheduler('r', {}), 'Either .pattern or .every options must be defined for this repeatable job'],
    [
      () => fx.queue.upsertJobScheduler('r', { every: 5_000, immediately: true, startDate: new Date() }),
      'Both .immediately and .startDate options are defined for this repeatable job',
    ],
    [
      () => fx.queue.upsertJobScheduler('r', { every: 5_000, endDate: Date.now() - 1_000 }),
      'End date must be greater than current timestamp',
    ],
    [
      () => fx.queue.upsertJobScheduler('r', { every: 100 }, { opts: { debounce: { id: 'legacy' } } as never }),
      'Debounce option has been removed. Use deduplication option instead',
    ],
  ]
  for (const [call, words] of refusals)
    await expect(call()).rejects.toMatchObject({ code: 'ERR_OPTIONS', message: expect.stringContaining(words) })
  expect(await fx.queue.getJobSchedulersCount()).toBe(0)
})
