/**
 * Workers on one backlog, as operators run them (worker processes from test/chaos/fixtures/chaos-worker.ts,
 * which report each start over IPC): workers that join a busy one all take jobs at once, whatever the
 * length of the jobs, and none says `drained` while jobs wait; a busy worker sets aside at most
 * concurrency + AHEAD_ROOM jobs, leases only the ones it runs, so a job added with a higher priority waits
 * behind few, and a SIGKILL charges an attempt only to the jobs that started (those in hand or reserved go
 * back with none used). No sweep runs while the workers take: only adds and sweeps re-arm the marker.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { type Job, sweep, type Worker } from '../../lib/index.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { AHEAD_ROOM } from '../../lib/worker/take-ahead.js'
import { type ChaosWorker, spawnChaosWorker } from '../chaos/workers.js'
import { useQueues } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const { open, worker } = useQueues(redis)
const keys = queueKeys('emq', 'q')
const spawned: ChaosWorker[] = []
const closing: Worker[] = []

afterEach(async () => {
  await Promise.all(closing.splice(0).map((w) => w.close()))
  for (const w of spawned.splice(0)) {
    w.proc.kill('SIGKILL')
    await w.closed
  }
})

async function spawn(env: Record<string, string>): Promise<ChaosWorker> {
  const w = await spawnChaosWorker({ REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '1000', HEARTBEAT_MS: '250', ...env })
  spawned.push(w)
  return w
}

const starts = (w: ChaosWorker) => w.messages.filter((m) => m.t === 's').length

async function addBacklog(n: number, opts: { priority?: number; removeOnComplete?: boolean } = {}): Promise<void> {
  const queue = open('q')
  for (let i = 0; i < n; i += 1_000)
    await queue.addBulk(Array.from({ length: Math.min(1_000, n - i) }, (_, k) => ({ name: 'j', data: { k: i + k }, opts })))
  await queue.close()
}

describe('workers joining a busy one', () => {
  it('every worker process runs jobs as soon as it joins, and none says drained while jobs wait (jobs of 20-40 ms)', async () => {
    await addBacklog(3_000)
    const env = { CONCURRENCY: '1', WORK_MIN_MS: '20', WORK_MAX_MS: '40' }
    const first = await spawn(env)
    await waitFor(() => starts(first) >= 10, { timeoutMs: 20_000, what: 'the first worker to run' })

    const joined = await Promise.all([1, 2, 3].map(() => spawn(env)))
    const fleet = [first, ...joined]
    const before = fleet.map(starts)
    await waitFor(() => fleet.every((w, i) => starts(w) - (before[i] ?? 0) >= 10), {
      timeoutMs: 20_000,
      what: 'each of the four workers to run 10 jobs after the others joined',
    })

    // The backlog never ran dry: a `drained` would have been false.
    expect(await redis.client.llen(keys.wait)).toBeGreaterThan(1_000)
    expect(fleet.flatMap((w) => w.messages.filter((m) => m.t === 'd'))).toEqual([])
    expect(fleet.flatMap((w) => w.messages.filter((m) => m.t === 'e'))).toEqual([])
  }, 60_000)

  it('short jobs (under the reserving threshold): workers that join share the backlog, and drained comes only once it is gone', async () => {
    await addBacklog(2_000)
    const started = [0, 0, 0, 0]
    const drainedAt: number[][] = [[], [], [], []]
    const make = (i: number) => {
      const w = worker(
        'q',
        async () => {
          started[i] = (started[i] ?? 0) + 1
          await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 2))
        },
        { concurrency: 2 },
      )
      w.on('drained', () => drainedAt[i]?.push(started.reduce((a, b) => a + b)))
      closing.push(w)
      return w
    }
    make(0)
    await waitFor(() => (started[0] ?? 0) >= 50, { what: 'the first worker to run' })
    for (const i of [1, 2, 3]) make(i)
    const before = [...started]
    await waitFor(() => started.every((n, i) => n - (before[i] ?? 0) >= 30), {
      timeoutMs: 20_000,
      what: 'each of the four workers to run 30 jobs after the others joined',
    })
    expect(await redis.client.llen(keys.wait)).toBeGreaterThan(0)
    await waitFor(() => drainedAt.every((d) => d.length > 0), { timeoutMs: 30_000, what: 'every worker to say drained' })

    // Each drained came once all but the jobs the other workers had set aside (or were taking) had started.
    const aside = 3 * (2 * 2 + AHEAD_ROOM)
    for (const d of drainedAt) expect(d[0]).toBeGreaterThanOrEqual(2_000 - aside)
  })
})

describe("a busy worker's hand", () => {
  it('leases only the jobs it runs: a priority-1 job waits behind few, and a SIGKILL counts a stall for the started jobs only', async () => {
    const concurrency = 2
    await addBacklog(3_000, { priority: 10, removeOnComplete: false })
    const w = await spawn({ CONCURRENCY: String(concurrency), WORK_MIN_MS: '1', WORK_MAX_MS: '3', LOCK_MS: '500', HEARTBEAT_MS: '100' })
    await waitFor(() => starts(w) >= 200, { timeoutMs: 20_000, what: 'the worker to run short jobs' })

    // Sampled back to back: never a leased job beyond those running.
    let mostLeased = 0
    for (let i = 0; i < 300; i++) mostLeased = Math.max(mostLeased, await redis.client.zcard(keys.active))
    expect(mostLeased).toBeLessThanOrEqual(concurrency)

    // Behind a job added with a higher priority: only what the worker had set aside or was taking.
    // Counted from the moment the add script ran (createdOn is Redis's clock, same host): a job started while
    // the add was still on its way was taken before the urgent job existed.
    const queue = open('q')
    const urgent = await queue.add('urgent', {}, { priority: 1, removeOnComplete: false })
    const urgentStart = await waitFor(() => w.messages.find((m) => m.t === 's' && m.id === urgent.id), { what: 'the urgent job to start' })
    const ahead = w.messages.filter((m) => m.t === 's' && (m.at ?? 0) > urgent.timestamp && (m.at ?? 0) < (urgentStart.at ?? 0))
    expect(ahead.length).toBeLessThanOrEqual(2 * concurrency + AHEAD_ROOM)

    // Killed mid-run: the sweeps count a stall for the running jobs only; the rest go back unstarted.
    w.proc.kill('SIGKILL')
    await w.closed
    w.killed = true
    const recovered: string[] = []
    await waitFor(
      async () => {
        recovered.push(...(await sweep(redis.client, 'q', { graceMs: 0 })).recovered)
        return (await redis.client.zcard(keys.active)) + (await redis.client.zcard(keys.reserved)) === 0
      },
      { timeoutMs: 10_000, intervalMs: 100, what: 'the leases and reservations to expire and come back' },
    )
    expect(recovered.length).toBeLessThanOrEqual(concurrency)
    expect(await redis.client.zcard(keys.reserved)).toBe(0)
    const counts = await queue.counts()
    // counts().wait counts waiting jobs without a priority; these all have one.
    expect(counts.wait + counts.prioritized + counts.completed).toBe(3_001)
    const ended = new Set(w.messages.filter((m) => m.t === 'c').map((m) => m.id))
    const waiting = await queue.getJobs('prioritized', 0, -1)
    const charged = waiting.filter((j: Job) => j.stalledCounter > 0).map((j: Job) => j.id)
    expect(charged.sort()).toEqual([...recovered].sort())
    expect(charged.every((id) => !ended.has(id))).toBe(true)
    await queue.close()
  })
})
