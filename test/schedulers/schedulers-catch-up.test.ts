/**
 * Job schedulers that fall behind, and BullMQ's count of pending runs, on a real Redis. With no worker a
 * sweep makes every period due since the last one (up to the catch-up limit), in order and once, in calls
 * of bounded size; while workers keep up a scheduler has one run pending, as BullMQ's; removeJobScheduler
 * takes that run even out of a worker's reservation. Time passes for real (short periods, the sweep's own
 * calls), or a scheduler is moved back in time by hand (`rewind`) where a wait would take seconds.
 */
import { describe, expect, it } from 'vitest'
import { type Job, sweep } from '../../lib/index.js'
import { ITERATE_MAX_RUNS, iterationId, loadScript, SCRIPT_FILES } from '../../lib/redis/commands.js'
import { serverTimeMs } from '../../lib/redis/queries.js'
import { CATCH_UP_MAX_RUNS } from '../../lib/schedulers/timing.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

const now = () => serverTimeMs(redis.client)

/** Until Redis's clock reads `ms`. */
async function until(ms: number): Promise<void> {
  await waitFor(async () => (await now()) >= ms, { intervalMs: 5, what: `Redis's clock at ${ms}` })
}

/** The due times of scheduler `sid`'s iterations in `state`, oldest first. */
async function duesIn(sid: string, state: 'wait' | 'delayed'): Promise<number[]> {
  const ids = state === 'wait' ? await redis.client.lrange(fx.keys.wait, 0, -1) : await redis.client.zrange(fx.keys.delayed, '0', '-1')
  return ids
    .filter((id) => id.startsWith(`repeat:${sid}:`))
    .map((id) => Number(id.slice(id.lastIndexOf(':') + 1)))
    .sort((a, b) => a - b)
}

const gaps = (dues: number[]) => dues.slice(1).map((d, i) => d - (dues[i] as number))

/**
 * Moves scheduler `sid` back `ms` in time, as if no worker and no sweep had run for that long: its next
 * run is due `ms` earlier (and moved with it when it was made already).
 */
async function rewind(sid: string, ms: number): Promise<number> {
  const next = Number(await redis.client.zscore(fx.keys.schedulers, sid))
  const key = fx.keys.scheduler(sid)
  const last = await redis.client.hget(key, 'last')
  const earlier = next - ms
  const made = fx.keys.job(iterationId(sid, next))
  if ((await redis.client.exists(made)) === 1) {
    await redis.client.rename(made, fx.keys.job(iterationId(sid, earlier)))
    await redis.client.hset(fx.keys.job(iterationId(sid, earlier)), 'dueAt', earlier)
    await redis.client.zrem(fx.keys.delayed, iterationId(sid, next))
    await redis.client.zadd(fx.keys.delayed, earlier, iterationId(sid, earlier))
    if (last === String(next)) await redis.client.hset(key, 'last', earlier)
  }
  await redis.client.zadd(fx.keys.schedulers, earlier, sid)
  return earlier
}

describe('a schedule with no worker', () => {
  it('each sweep makes every period due since the last one, in order and once; none is made ahead', async () => {
    const every = 50
    await fx.queue.upsertJobScheduler('beat', { every })
    const first = (await duesIn('beat', 'wait'))[0] as number
    for (let round = 1; round <= 3; round++) {
      await until(first + round * 10 * every)
      const before = await now()
      await sweep(redis.client, 'q')
      const waiting = await duesIn('beat', 'wait')

      expect(waiting[0]).toBe(first)
      expect(gaps(waiting)).toEqual(gaps(waiting).map(() => every))
      // Every period due when the sweep began is made.
      expect(waiting.at(-1)).toBeGreaterThan(before - every)
      expect((await fx.queue.getJobScheduler('beat'))?.next).toBe((waiting.at(-1) as number) + every)
      expect(await duesIn('beat', 'delayed')).toEqual([])
    }
  })

  it('a cron every second five seconds behind: one sweep makes the periods missed and the one due now, then goes on', async () => {
    await fx.queue.upsertJobScheduler('second', { pattern: '* * * * * *' })
    const behind = await rewind('second', 5_000)
    const before = await now()
    await sweep(redis.client, 'q')
    const waiting = await duesIn('second', 'wait')

    expect(waiting[0]).toBe(behind)
    expect(waiting.length).toBeGreaterThanOrEqual(5)
    expect(gaps(waiting)).toEqual(gaps(waiting).map(() => 1_000))
    expect(waiting.at(-1)).toBeGreaterThan(before - 1_000)
    const next = (await fx.queue.getJobScheduler('second'))?.next as number
    expect(next).toBe((waiting.at(-1) as number) + 1_000)

    await until(next)
    await sweep(redis.client, 'q')
    await sweep(redis.client, 'q')
    const after = await duesIn('second', 'wait')
    expect(after).toEqual([...waiting, next])
  })

  it('far behind: one sweep makes the newest CATCH_UP_MAX_RUNS periods, in calls of ITERATE_MAX_RUNS runs', async () => {
    const every = 10
    await fx.queue.upsertJobScheduler('fast', { every })
    const [first] = await duesIn('fast', 'wait')
    // Not a whole number of periods, so no period falls on the first run's time (made already, never made twice).
    await rewind('fast', 600_005)
    // Every command into the slow log (a script's own commands too), to read each call's arguments.
    await redis.client.config('SET', 'slowlog-max-len', '100000')
    await redis.client.config('SET', 'slowlog-log-slower-than', '0')
    await redis.client.slowlog('RESET')
    const before = await now()
    await sweep(redis.client, 'q')
    const log = (await redis.client.slowlog('GET', 10_000)) as [number, number, number, string[]][]
    await redis.client.config('SET', 'slowlog-log-slower-than', '10000')
    await redis.client.slowlog('RESET')
    const made = (await duesIn('fast', 'wait')).filter((d) => d !== first)

    expect(made).toHaveLength(CATCH_UP_MAX_RUNS)
    expect(gaps(made)).toEqual(gaps(made).map(() => every))
    expect(made.at(-1)).toBeGreaterThan(before - every)
    // Each call's size: SLOWLOG keeps 31 arguments and says how many more there were.
    const iterate = loadScript(SCRIPT_FILES.iterate).sha
    const calls = log.filter(([, , , args]) => args[0]?.toUpperCase() === 'EVALSHA' && args[1] === iterate)
    const argc = calls.map(([, , , args]) => args.length - 1 + Number(/\((\d+) more arguments\)/.exec(args.at(-1) ?? '')?.[1] ?? 0))
    expect(calls.length).toBe(Math.ceil(CATCH_UP_MAX_RUNS / ITERATE_MAX_RUNS))
    expect(Math.max(...argc)).toBeLessThan(3_999)
    expect(Math.max(...argc)).toBeLessThan(12 + 11 + 3 * ITERATE_MAX_RUNS)
  })
})

describe("BullMQ's count of pending runs", () => {
  it('five schedulers, four crons and an every: four delayed, one waiting (BullMQ test_job_scheduler)', async () => {
    const crons = ['10 * * * * *', '2 10 * * * *', '1 * * 5 * *', '2 * * 4 * *']
    await Promise.all([
      ...crons.map((pattern, i) => fx.queue.upsertJobScheduler(`cron${i}`, { pattern })),
      fx.queue.upsertJobScheduler('fifth', { every: 5_000 }),
    ])

    expect((await fx.queue.getJobSchedulers(0, -1)).length).toBe(5)
    expect(await fx.queue.counts()).toMatchObject({ delayed: 4, wait: 1 })
    expect((await fx.queue.getJobScheduler('fifth'))?.iterationCount).toBe(1)
  })

  it('a worker alone keeps a schedule going: a run it starts makes the next one, delayed; one run pending at rest', async () => {
    const runs: string[] = []
    fx.worker((job: Job) => void runs.push(job.id))
    await fx.queue.upsertJobScheduler('tick', { every: 100 })
    await waitFor(() => runs.length >= 5, { what: 'five runs' })
    // At rest between two periods: the next run made (delayed), nothing waiting or running.
    await waitFor(
      async () => {
        const c = await fx.queue.counts()
        const last = Number(runs.at(-1)?.split(':')[2])
        return c.active === 0 && c.wait === 0 && c.delayed === 1 && (await duesIn('tick', 'delayed'))[0] === last + 100
      },
      { what: 'the next run delayed, nothing else pending' },
    )

    const dues = runs.map((id) => Number(id.slice(id.lastIndexOf(':') + 1)))
    expect(gaps(dues)).toEqual(gaps(dues).map(() => 100))
  })
})

describe('a worker that cannot make the next run', () => {
  it('reports it and tries again until it can: a fleet with no sweep keeps its schedule', async () => {
    await fx.queue.upsertJobScheduler('tick', { every: 60_000 })
    const [first] = await duesIn('tick', 'wait')
    // The scheduler's hash unreadable for a while (a fault from outside: WRONGTYPE on every read).
    const key = fx.keys.scheduler('tick')
    const hash = await redis.client.hgetall(key)
    await redis.client.del(key)
    await redis.client.set(key, 'not a hash')
    const errors: unknown[] = []
    const w = fx.worker(() => 'ok')
    w.on('error', (err) => errors.push(err))
    await waitFor(() => errors.length > 0, { what: 'the failure reported' })
    await redis.client.del(key)
    await redis.client.hset(key, hash)

    await waitFor(async () => (await duesIn('tick', 'delayed'))[0] === (first as number) + 60_000, { what: 'the next run made' })
    expect(String(errors[0])).toMatch(/WRONGTYPE/)
  })
})

describe('removeJobScheduler', () => {
  it.each([
    ['waiting', {}],
    ['prioritized', { priority: 3 }],
  ])('takes its pending run out of a worker reservation (%s): it never runs', async (_, opts) => {
    await fx.queue.upsertJobScheduler('gone', { every: 60_000 }, { opts })
    const [pending] = await fx.queue.getJobs(['wait', 'prioritized'])
    const id = pending?.id as string
    // A busy worker's take-ahead reserved it (takeJobs.lua reserveNext): out of line, into `reserved`.
    const score = await redis.client.zscore(fx.keys.prioritized, id)
    if (score !== null) {
      await redis.client.zrem(fx.keys.prioritized, id)
      await redis.client.hset(fx.keys.reservedScores, id, score)
    } else await redis.client.lrem(fx.keys.wait, 0, id)
    const expiry = (await now()) + 50
    await redis.client.zadd(fx.keys.reserved, expiry, id)

    expect(await fx.queue.removeJobScheduler('gone')).toBe(true)
    // The reservation would have expired and gone back in line: the sweep returns what is left.
    await until(expiry + 1)
    await sweep(redis.client, 'q')

    expect(await fx.queue.getJob(id)).toBeUndefined()
    expect(await fx.queue.counts()).toMatchObject({ wait: 0, prioritized: 0, delayed: 0 })
    expect(await redis.client.hlen(fx.keys.reservedScores)).toBe(0)
  })
})
