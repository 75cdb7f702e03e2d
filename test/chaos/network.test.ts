/**
 * Network faults between one worker (or the sweeper) and Redis, through test/chaos/proxy.ts: a stalled
 * link (connections open, nothing forwarded), a refusing one (connections reset and refused), a slow one,
 * and cuts. A worker that cannot renew must abort its jobs before their leases can be recovered elsewhere,
 * the sweeper must fail fast with a clear error, and close() must not hang once the link is back.
 */
import { Redis } from 'ioredis'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { EchoMQError, type Job, sweep } from '../../lib/index.js'
import { CLOSE_MARGIN_MS } from '../../lib/options.js'
import { type LeaseStatus, loadScript, SCRIPT_FILES } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { LockManager } from '../../lib/worker/lock-manager.js'
import { useQueue } from '../helpers/fixture.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { closeWithin } from './cleanup.js'
import { pause } from './config.js'
import { TcpProxy } from './proxy.js'

const LOCK_MS = 500
const HEARTBEAT_MS = 100
const redis = useRedis()
let proxy: TcpProxy
const stops: (() => Promise<unknown>)[] = []
const keys = queueKeys('emq', 'q')

beforeEach(async () => {
  proxy = await TcpProxy.start(redis.port)
})
// After-hooks run last-registered first: resume the proxy, close the workers, then close the proxy.
afterEach(async () => {
  await proxy.close()
})
const fx = useQueue(redis, {
  workers: { lockDuration: LOCK_MS, heartbeatInterval: HEARTBEAT_MS, closeTimeout: 200 },
  connection: () => proxy.url,
  onError: () => undefined,
  close: closeWithin,
})
const worker = fx.worker
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop()
  proxy.resume()
})

/** Holds every job until its signal aborts; records when. */
function holding() {
  const started = new Map<string, number>()
  const aborted = new Map<string, number>()
  const processor = (job: Job, _token: string, signal: AbortSignal) =>
    new Promise((_, reject) => {
      started.set(job.id, Date.now())
      signal.addEventListener(
        'abort',
        () => {
          aborted.set(job.id, Date.now())
          reject(signal.reason)
        },
        { once: true },
      )
    })
  return { processor, started, aborted }
}

/** Sweeps (no grace) on a direct connection every 50 ms until `id` is recovered; returns when, by the monotonic clock. */
async function sweepUntilRecovered(id: string, graceMs = 0): Promise<number> {
  const client = redis.connect()
  const deadline = performance.now() + 10_000
  while (performance.now() < deadline) {
    const result = await sweep(client, 'q', { graceMs })
    if (result.recovered.includes(id) || result.failed.includes(id)) return performance.now()
    await pause(50)
  }
  throw new Error(`${id} was not recovered within 10 s`)
}

/** How long `fn` takes, by the monotonic clock; at most 5 s (a hang fails the test, it does not stall it). */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now()
  const done = await Promise.race([fn().then(() => true), pause(5_000).then(() => false)])
  if (!done) throw new Error('still pending after 5 s')
  return performance.now() - started
}

/** A sweeper loop on a direct connection (every ~100 ms, no grace unless given): records when each job was recovered. */
function sweeper(graceMs = 0) {
  const recoveredAt = new Map<string, number>()
  let marked = 0
  let running = true
  const client = redis.connect()
  const loop = (async () => {
    while (running) {
      const result = await sweep(client, 'q', { graceMs })
      marked += result.marked.length
      for (const id of [...result.recovered, ...result.failed]) recoveredAt.set(id, Date.now())
      await pause(100)
    }
  })()
  const stop = async () => {
    running = false
    await loop
  }
  stops.push(stop)
  return { recoveredAt, marked: () => marked, stop }
}

describe('a worker that cannot reach Redis', () => {
  it('LockManager: a renewal that never gets an answer still reports the leases lost once their deadline passes', async () => {
    const clock = new ManualClock()
    const lost: string[] = []
    const locks = new LockManager({
      extend: () => new Promise<LeaseStatus[]>(() => undefined), // a stalled connection: no reply, no error
      intervalMs: HEARTBEAT_MS,
      leaseMs: LOCK_MS,
      clock,
      onLost: (id) => lost.push(id),
      onError: () => undefined,
    })
    locks.add({ id: 'a', token: 't' }, clock.now())
    locks.start()

    await clock.advance(LOCK_MS * 3)

    expect(lost).toEqual(['a'])
  })

  for (const fault of ['stall', 'refuse'] as const) {
    it(`${fault}: its jobs get lockLost around lockDuration, before two sweeps recover them elsewhere; nothing else accepts its runs`, async () => {
      const hold = holding()
      const w = worker(hold.processor, { concurrency: 2 })
      const lostAt = new Map<string, number>()
      w.on('lockLost', (job: Job) => lostAt.set(job.id, Date.now()))
      await fx.queue.add('job', {}, { jobId: 'a' })
      await fx.queue.add('job', {}, { jobId: 'b' })
      await waitFor(() => hold.started.size === 2, { what: 'the worker to take both jobs' })

      const faultAt = Date.now()
      if (fault === 'stall') proxy.stall()
      else proxy.refuse()
      // With a grace, as the reaper keeps one: lockLost then leads the recovery by more than a busy
      // machine's timer delays, not by one sweep interval.
      const sweeps = sweeper(200)
      // A healthy worker on a direct connection takes whatever is recovered.
      worker(async () => 'healthy', { connection: redis.url, closeTimeout: 5_000 })
      await waitFor(async () => (await redis.client.zcard(keys.completed)) === 2, {
        timeoutMs: 10_000,
        what: 'both jobs completed elsewhere',
      })
      await sweeps.stop()

      const report = ['a', 'b'].map((id) => ({
        id,
        lostAfterMs: lostAt.has(id) ? (lostAt.get(id) as number) - faultAt : null,
        recoveredAfterMs: (sweeps.recoveredAt.get(id) ?? NaN) - faultAt,
      }))
      console.log(`[chaos] network ${fault}: ${JSON.stringify(report)}`)
      for (const id of ['a', 'b'])
        expect(await fx.queue.getJob(id)).toMatchObject({ state: 'completed', returnValue: 'healthy', attemptsMade: 1, stalledCounter: 1 })
      // Aborted before the recovery, within about one lease (plus a heartbeat and scheduling slack).
      for (const r of report) {
        expect(r.lostAfterMs, `lockLost of ${r.id}`).not.toBeNull()
        expect(r.lostAfterMs as number).toBeLessThan(r.recoveredAfterMs)
        expect(r.lostAfterMs as number).toBeLessThanOrEqual(LOCK_MS + HEARTBEAT_MS + 250)
      }
    })
  }

  it('stall, then heal before any sweep: the aborted run returns its job to wait without charging an attempt', async () => {
    const hold = holding()
    const w = worker(hold.processor)
    const failed: string[] = []
    const lost: string[] = []
    w.on('failed', (job: Job) => failed.push(job.id))
    w.on('lockLost', (job: Job) => lost.push(job.id))
    await fx.queue.add('job', {}, { jobId: 'a' })
    await waitFor(() => hold.started.size === 1, { what: 'the worker to take the job' })

    proxy.stall()
    await waitFor(() => lost.includes('a'), { timeoutMs: 5_000, what: 'the stalled worker to give up its lease' })
    proxy.resume()
    // Back in wait, where the healed worker may already have taken it again.
    const job = await waitFor(
      async () => {
        const j = await fx.queue.getJob('a')
        return j && (j.state === 'wait' || j.attemptsStarted === 2) ? j : undefined
      },
      { timeoutMs: 5_000, what: 'the job back in wait' },
    )

    expect(hold.aborted.has('a')).toBe(true)
    expect(failed).toEqual([])
    expect(job.attemptsMade).toBe(0)
  })

  it('stall: close() returns within closeTimeout plus the margin while the link is still stalled; healed, the job is back in wait', async () => {
    const hold = holding()
    const w = worker(hold.processor)
    await fx.queue.add('job', {}, { jobId: 'a' })
    await waitFor(() => hold.started.size === 1, { what: 'the worker to take the job' })
    proxy.stall()

    const closeMs = await timed(() => w.close())
    proxy.resume()

    console.log(`[chaos] network stall: close() returned after ${closeMs.toFixed(0)} ms with the link stalled (closeTimeout 200)`)
    expect(closeMs).toBeLessThan(200 + CLOSE_MARGIN_MS + 150)
    expect(hold.aborted.has('a')).toBe(true)
    // Its release was sent into the stall and arrives once healed: back in wait, no attempt used.
    await waitFor(async () => (await fx.queue.getJob('a'))?.state === 'wait', { what: 'the job back in wait' })
    expect(await fx.queue.getJob('a')).toMatchObject({ state: 'wait', attemptsMade: 0 })
  })

  for (const held of ['LRANGE', 'take script'] as const) {
    it(`the link stalls while the worker waits for its ${held} reply: close() returns on time; the late reply hands the job back unstarted`, async () => {
      const hold = holding()
      const w = worker(hold.processor)
      await waitFor(async () => /cmd=bzpopmin/.test(String(await redis.client.call('CLIENT', 'LIST'))), { what: 'the worker to block' })
      const sha = loadScript(SCRIPT_FILES.take).sha
      proxy.holdRepliesAfter((chunk) => (held === 'LRANGE' ? /lrange/i.test(chunk.toString()) : chunk.includes(sha)))
      await fx.queue.add('job', {}, { jobId: 'a' })
      if (held === 'take script') await waitFor(async () => (await fx.queue.getJob('a'))?.state === 'active', { what: 'the take to run' })
      else await waitFor(() => proxy.holding.size === 1, { what: 'the LRANGE reply to be held' })

      const closeMs = await timed(() => w.close())
      proxy.resume()

      console.log(`[chaos] network held ${held}: close() returned after ${closeMs.toFixed(0)} ms (closeTimeout 200)`)
      expect(closeMs).toBeLessThan(200 + CLOSE_MARGIN_MS + 150)
      await waitFor(async () => (await fx.queue.getJob('a'))?.state === 'wait', { what: 'the job in wait' })
      expect(await fx.queue.getJob('a')).toMatchObject({ state: 'wait', attemptsMade: 0 })
      expect(await redis.client.exists(keys.lock('a'))).toBe(0)
      expect(hold.started.size).toBe(0)
    })
  }

  it('refuse: close() called while Redis is unreachable returns within closeTimeout plus the margin', async () => {
    const w = worker(async () => 'done')
    // Idle: blocked on the marker (Redis lists the blocked client with its command).
    await waitFor(async () => proxy.openConnections >= 2 && /cmd=bzpopmin/.test(String(await redis.client.call('CLIENT', 'LIST'))), {
      what: 'the worker to block on the marker',
    })
    proxy.refuse()
    // Both of its connections are now retrying (each retry is refused).
    await waitFor(() => proxy.stats.refused >= 4, { what: 'reconnect attempts' })

    const closeMs = await timed(() => w.close())

    console.log(`[chaos] network refuse: close() returned after ${closeMs.toFixed(0)} ms with Redis unreachable`)
    expect(closeMs).toBeLessThan(200 + CLOSE_MARGIN_MS + 150)
  })

  it('refuse and never heal: close() still returns, bounded by closeTimeout, and the job is recovered later', async () => {
    const hold = holding()
    const w = worker(hold.processor, { closeTimeout: 200 })
    await fx.queue.add('job', {}, { jobId: 'a' })
    await waitFor(() => hold.started.size === 1, { what: 'the worker to take the job' })
    proxy.refuse()
    await waitFor(() => proxy.stats.refused >= 2, { what: 'reconnect attempts' })

    const closeMs = await timed(() => w.close())

    console.log(`[chaos] network refuse (never healed): close() returned after ${closeMs.toFixed(0)} ms`)
    expect(closeMs).toBeLessThan(200 + CLOSE_MARGIN_MS + 150)
    expect(hold.aborted.has('a')).toBe(true)
    // Its release never reached Redis: the lease expires and the sweep recovers the job.
    await waitFor(async () => (await redis.client.exists(keys.lock('a'))) === 0, { what: 'the lease to lapse' })
    await sweep(redis.client, 'q', { graceMs: 0 })
    expect((await sweep(redis.client, 'q', { graceMs: 0 })).recovered).toEqual(['a'])
  })
})

describe('a wall-clock step (what NTP does to a drifting host) changes nothing the worker measures', () => {
  afterEach(() => vi.restoreAllMocks())

  it('Date.now stepped back 30 s as the link stalls: lockLost still comes at about one lease, before the job is recovered elsewhere', async () => {
    const started = new Set<string>()
    let lostAt: number | undefined
    const w = worker((job, _token, signal) => {
      started.add(job.id)
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))
    })
    w.on('lockLost', () => (lostAt ??= performance.now()))
    await fx.queue.add('job', {}, { jobId: 'a' })
    await waitFor(() => started.has('a'), { what: 'the worker to take the job' })

    const realNow = Date.now.bind(Date)
    const faultAt = performance.now()
    proxy.stall()
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() - 30_000)
    // A grace between mark and recovery, as the reaper keeps one (15 s by default): with none, the order
    // of lockLost and the recovery would be a race of 50 ms against the worker's timer on a busy machine.
    const recoveredAt = await sweepUntilRecovered('a', 200)

    const lostAfter = (lostAt ?? Number.POSITIVE_INFINITY) - faultAt
    console.log(
      `[chaos] clock step -30 s: lockLost after ${lostAfter.toFixed(0)} ms, recovered after ${(recoveredAt - faultAt).toFixed(0)} ms`,
    )
    expect(lostAfter).toBeLessThan(recoveredAt - faultAt)
    expect(lostAfter).toBeLessThanOrEqual(LOCK_MS + HEARTBEAT_MS + 250)
  })

  it('Date.now stepped back 10 s during close(): it still returns within closeTimeout plus the margin', async () => {
    const w = worker((_job, _token, signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))))
    await fx.queue.add('job', {}, { jobId: 'a' })
    await waitFor(async () => (await fx.queue.getJob('a'))?.state === 'active', { what: 'the job to start' })
    const realNow = Date.now.bind(Date)

    const closeMs = await timed(async () => {
      const closing = w.close()
      vi.spyOn(Date, 'now').mockImplementation(() => realNow() - 10_000)
      await closing
    })

    expect(closeMs).toBeLessThan(200 + CLOSE_MARGIN_MS + 150)
    vi.restoreAllMocks()
    expect(await fx.queue.getJob('a')).toMatchObject({ state: 'wait', attemptsMade: 0 })
  })
})

describe('a worker behind a degraded link carries on', () => {
  it('slow link (100 ms each way, lease 1000 ms): it keeps its leases, nothing is marked or recovered, every job completes once on it', async () => {
    proxy.slow(100)
    const lost: string[] = []
    const w = worker(
      async (job, _token, signal) => {
        await new Promise((resolve, reject) => {
          const t = setTimeout(resolve, 300)
          signal.addEventListener(
            'abort',
            () => {
              clearTimeout(t)
              reject(signal.reason)
            },
            { once: true },
          )
        })
        return `slow:${job.attemptsStarted}`
      },
      { lockDuration: 1_000, concurrency: 5 },
    )
    w.on('lockLost', (job: Job) => lost.push(job.id))
    const completions: string[] = []
    w.on('completed', (job: Job) => completions.push(job.id))
    const sweeps = sweeper()
    const ids = Array.from({ length: 10 }, (_, i) => `s${i}`)
    for (const id of ids) await fx.queue.add('job', {}, { jobId: id })

    await waitFor(() => completions.length === ids.length, { timeoutMs: 15_000, what: 'every job completed' })
    await sweeps.stop()

    console.log(
      `[chaos] network slow: completed=${completions.length} lockLost=${lost.length} marked=${sweeps.marked()} recovered=${sweeps.recoveredAt.size} chunksDelayed=${proxy.stats.chunks}`,
    )
    expect(lost).toEqual([])
    expect(sweeps.marked()).toBe(0)
    expect(sweeps.recoveredAt.size).toBe(0)
    expect(completions.sort()).toEqual([...ids].sort())
    for (const id of ids) expect(await fx.queue.getJob(id)).toMatchObject({ state: 'completed', returnValue: 'slow:1', attemptsMade: 1 })
  })

  it('cuts (every connection reset, reconnects allowed): it reconnects and every job completes exactly once', async () => {
    const completions = new Map<string, number>()
    const w = worker(
      async (job, _token, signal) => {
        await new Promise((resolve, reject) => {
          const t = setTimeout(resolve, 20 + Math.random() * 30)
          signal.addEventListener(
            'abort',
            () => {
              clearTimeout(t)
              reject(signal.reason)
            },
            { once: true },
          )
        })
        return job.attemptsStarted
      },
      { concurrency: 3 },
    )
    w.on('completed', (job: Job) => completions.set(job.id, (completions.get(job.id) ?? 0) + 1))
    const sweeps = sweeper()
    const ids = Array.from({ length: 60 }, (_, i) => `c${i}`)
    for (const id of ids) await fx.queue.add('job', {}, { jobId: id })

    let cuts = 0
    for (let k = 1; k <= 3; k++) {
      const done = (await redis.client.zcard(keys.completed)) as number
      await waitFor(async () => (await redis.client.zcard(keys.completed)) > done, { timeoutMs: 10_000, what: `progress before cut ${k}` })
      cuts += proxy.cut()
    }
    await waitFor(async () => (await redis.client.zcard(keys.completed)) === ids.length, { timeoutMs: 20_000, what: 'every job completed' })
    await sweeps.stop()

    const jobs = await Promise.all(ids.map((id) => fx.queue.getJob(id)))
    console.log(
      `[chaos] network cut: cuts=${cuts} connections=${proxy.stats.connections} completedEvents=${[...completions.values()].reduce((a, b) => a + b, 0)} recovered=${sweeps.recoveredAt.size}`,
    )
    expect(cuts).toBeGreaterThanOrEqual(3)
    expect(proxy.stats.connections).toBeGreaterThan(2) // it reconnected
    expect(jobs.every((j) => j?.state === 'completed' && j.returnValue === j.attemptsStarted)).toBe(true)
    expect([...completions.values()].every((n) => n === 1)).toBe(true)
  })
})

describe('the sweeper through a faulty link fails fast', () => {
  it('the Lambda handler (REDIS_TIMEOUT_MS=300) fails within about the timeout with ERR_CONNECTION when stalled or refused, and sweeps again once healed', async () => {
    await crashedJobs(redis.client, 'q', 2)
    const handler = createHandler({ REDIS_URL: proxy.url, REDIS_TIMEOUT_MS: '300', METRICS_MODE: 'off', QUEUES: 'q', SWEEP_GRACE_MS: '0' })
    stops.push(() => handler.close())
    const invoke = async () => {
      const t = Date.now()
      try {
        return { ms: Date.now() - t, summary: await handler({}), error: undefined }
      } catch (err) {
        return { ms: Date.now() - t, summary: undefined, error: err as EchoMQError }
      }
    }

    const healthy = await invoke()
    proxy.stall()
    const stalled = await invoke()
    proxy.resume()
    const healed = await invoke()
    proxy.refuse()
    const refused = await invoke()
    proxy.resume()
    const again = await invoke()

    console.log(
      `[chaos] handler: stalled ${stalled.ms} ms "${stalled.error?.message}"; refused ${refused.ms} ms "${refused.error?.message}"`,
    )
    expect(healthy.summary?.queues.q).toMatchObject({ marked: 2 })
    for (const failed of [stalled, refused]) {
      expect(failed.error).toBeInstanceOf(EchoMQError)
      expect(failed.error?.code).toBe('ERR_CONNECTION')
      expect(failed.error?.message).toMatch(/unreachable|timed out|max retries/i)
      expect(failed.ms).toBeLessThan(1_500)
    }
    expect(healed.summary?.queues.q).toMatchObject({ recovered: 2 })
    expect(again.error).toBeUndefined()
  })

  it('sweep() with a client that has a command timeout fails fast with ERR_CONNECTION through a stalled link', async () => {
    const client = new Redis(proxy.port, '127.0.0.1', { commandTimeout: 300, maxRetriesPerRequest: 1 })
    client.on('error', () => undefined)
    stops.push(async () => client.disconnect())
    await client.ping()
    proxy.stall()
    const t = Date.now()
    const error = await sweep(client, 'q', { graceMs: 0 }).then(
      () => undefined,
      (err: EchoMQError) => err,
    )
    const ms = Date.now() - t
    console.log(`[chaos] sweep(client) stalled: ${ms} ms "${error?.message}"`)
    expect(error?.code).toBe('ERR_CONNECTION')
    expect(ms).toBeLessThan(1_500)
  })

  it('sweep() given a URL settles with ERR_CONNECTION through a stalled link (its own 5 s command timeout)', async () => {
    proxy.stall()
    const t = Date.now()
    let outcome: string | undefined
    void sweep(proxy.url, 'q', { graceMs: 0 }).then(
      () => (outcome = 'resolved'),
      (err: EchoMQError) => (outcome = `${err.code}: ${err.message}`),
    )
    const settled = await waitFor(() => outcome, { timeoutMs: 8_000, what: 'sweep(url) to settle' }).then(
      () => true,
      () => false,
    )
    console.log(`[chaos] sweep(url) stalled: ${settled ? `settled after ${Date.now() - t} ms: ${outcome}` : 'still pending after 8 s'}`)
    expect(settled).toBe(true)
    expect(outcome).toMatch(/^ERR_CONNECTION/)
  })
})
