/**
 * Crashes under load: worker processes are SIGKILLed (and respawned) and SIGSTOPped/SIGCONTed at random
 * while three overlapping sweeper loops run the two-phase sweep with short leases. Processors also fail at
 * random, so retries wait their backoff in `delayed`, and retention is on (completed jobs beyond a count
 * are removed, by workers and by the sweeps). Jobs have random priorities, the workers a limiter, and a
 * job scheduler makes a job every 100 ms meanwhile: every iteration is made once, none skipped, and each
 * runs to completion. At the end every job is completed, failed or removed by
 * retention exactly once, the attempt counters agree with what the workers and sweepers saw, and no
 * fenced-out run had its result accepted.
 */
import type { EventEmitter } from 'node:events'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { Queue, QueueEvents, sweep } from '../../lib/index.js'
import { fieldsFromHash } from '../../lib/job.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { startRedis, type TestRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { FULL, pause, rng, sizes } from './config.js'
import { type ChaosMessage, type ChaosWorker, retire, spawnChaosWorker } from './workers.js'

const QUEUE = 'chaos'
const keys = queueKeys('emq', QUEUE)
const LOCK_MS = 400
const HEARTBEAT_MS = 100
const GRACE_MS = 50
const ATTEMPTS = 4
const CONCURRENCY = FULL ? 4 : 2
const FAIL_RATE = 0.1
const BACKOFF_MS = 20

let redis: TestRedis
const everyWorker: ChaosWorker[] = []

beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await Promise.all(
    everyWorker.map((w) => {
      if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill('SIGKILL')
      return w.closed
    }),
  )
  await redis?.stop()
})

const count = <K>(map: Map<K, number>, key: K, by = 1) => map.set(key, (map.get(key) ?? 0) + by)

/** An atomic view of the queue's id collections; returns the invariant violations it shows. */
async function sample(client: Redis): Promise<string[]> {
  const replies =
    (await client
      .multi()
      .lrange(keys.wait, 0, -1)
      .zrange(keys.active, '0', '-1')
      .zrange(keys.completed, '0', '-1')
      .zrange(keys.failed, '0', '-1')
      .zrange(keys.delayed, '0', '-1')
      .zrange(keys.reserved, '0', '-1')
      .zrange(keys.prioritized, '0', '-1')
      .exec()) ?? []
  const [wait, active, completed, failed, delayed, reserved, prioritized] = replies.map(([err, value]) => {
    if (err) throw err
    return value as string[]
  }) as [string[], string[], string[], string[], string[], string[], string[]]
  const found: string[] = []
  const waitSet = new Set(wait)
  if (waitSet.size !== wait.length)
    found.push(
      `duplicate ids in wait: ${wait
        .filter((id, i) => wait.indexOf(id) !== i)
        .slice(0, 5)
        .join(',')}`,
    )
  const named: [string, string[]][] = [
    ['wait', [...waitSet]],
    ['active', active],
    ['completed', completed],
    ['failed', failed],
    ['delayed', delayed],
    ['reserved', reserved],
    ['prioritized', prioritized],
  ]
  for (let i = 0; i < named.length; i++) {
    for (let j = i + 1; j < named.length; j++) {
      const [a, as] = named[i] as [string, string[]]
      const [b, bs] = named[j] as [string, string[]]
      const bSet = new Set(bs)
      const both = as.filter((id) => bSet.has(id))
      if (both.length > 0) found.push(`ids in both ${a} and ${b}: ${both.slice(0, 5).join(',')}`)
    }
  }
  return found
}

it(`${sizes.jobs} jobs, ${sizes.workers} worker processes killed and paused at random, 3 overlapping sweepers: every job finished exactly once`, {
  timeout: FULL ? 600_000 : 90_000,
}, async () => {
  const r = rng()
  const t0 = Date.now()
  const N = sizes.jobs
  const env = {
    REDIS_URL: redis.url,
    QUEUE,
    LOCK_MS: String(LOCK_MS),
    HEARTBEAT_MS: String(HEARTBEAT_MS),
    CONCURRENCY: String(CONCURRENCY),
    WORK_MIN_MS: '2',
    WORK_MAX_MS: '50',
    FAIL_RATE: String(FAIL_RATE),
    // A limiter every start goes through, wide enough not to slow the run.
    LIMIT_MAX: '500',
    LIMIT_MS: '1000',
  }
  const live = new Set<ChaosWorker>()
  const spawn = async () => {
    const w = await spawnChaosWorker(env)
    everyWorker.push(w)
    live.add(w)
    return w
  }
  await Promise.all(Array.from({ length: sizes.workers }, spawn))

  // Three sweepers on their own connections, overlapping.
  const sweeps = { calls: 0, errors: 0, marked: 0, recovered: new Map<string, number>(), failed: new Map<string, number>() }
  let sweeping = true
  const sweepers = [0, 1, 2].map(async () => {
    const client = redis.connect()
    while (sweeping) {
      try {
        const result = await sweep(client, QUEUE, { graceMs: GRACE_MS })
        sweeps.calls++
        sweeps.marked += result.marked.length
        for (const id of result.recovered) count(sweeps.recovered, id)
        for (const id of result.failed) count(sweeps.failed, id)
      } catch (err) {
        sweeps.errors++
        console.error('[chaos] sweep failed:', (err as Error).message)
      }
      await pause(r.int(100, 200))
    }
  })

  // Atomic samples of wait/active/completed/failed while everything runs.
  const violations: string[] = []
  let samples = 0
  let sampling = true
  const sampler = (async () => {
    const client = redis.connect()
    while (sampling) {
      try {
        violations.push(...(await sample(client)))
        samples++
      } catch (err) {
        violations.push(`sample failed: ${(err as Error).message}`)
      }
      await pause(FULL ? 150 : 50)
    }
  })()

  // Retention keeps a third of the completed jobs, so trims run throughout; failed ones are all kept.
  const keepCompleted = Math.floor(N / 3)
  // direct: a queue with its own retention options over a whole load run
  const queue = new Queue(QUEUE, {
    connection: redis.client,
    defaultJobOptions: { attempts: ATTEMPTS, backoff: BACKOFF_MS, removeOnComplete: { count: keepCompleted }, removeOnFail: false },
    // A listener that falls behind must not lose entries to the cap while it catches up.
    streams: { events: { maxLen: 1_000_000 } },
  })
  // A listener for the whole run: every completion it hears must be a job completed exactly once.
  const listener = new QueueEvents(QUEUE, { connection: redis.url, blockingTimeout: 200 })
  const heardCompleted: string[] = []
  let heardProgress = 0
  listener.on('completed', ({ jobId }: { jobId: string }) => heardCompleted.push(jobId))
  listener.on('progress', () => heardProgress++)
  let lastEvent: string | undefined
  for (const name of [
    'added',
    'waiting',
    'active',
    'progress',
    'completed',
    'failed',
    'delayed',
    'stalled',
    'retries-exhausted',
    'removed',
  ])
    (listener as EventEmitter).on(name, (_payload: unknown, id: string) => (lastEvent = id))
  listener.on('drained', (id: string) => (lastEvent = id))
  await listener.waitUntilReady()
  const ids = Array.from({ length: N }, (_, i) => `j${i}`)
  for (let i = 0; i < N; i += 500) {
    // A third of the jobs have a priority (1-3): they wait in `prioritized` behind the others.
    await Promise.all(
      ids
        .slice(i, i + 500)
        .map((id, k) => queue.add('work', { i: i + k }, { jobId: id, priority: (i + k) % 6 < 2 ? 1 + ((i + k) % 3) : 0 })),
    )
  }
  // A scheduler making 20 jobs 100 ms apart while the workers are killed.
  const ITERATIONS = 20
  await queue.upsertJobScheduler('tick', { every: 100, limit: ITERATIONS }, { name: 'tick' })
  // Finished: no longer waiting (in `wait`, `prioritized` or reserved by a worker), delayed or in flight
  // (so completed, failed, or completed and removed by retention); the scheduler's iterations too.
  const unfinishedSets = [keys.active, keys.delayed, keys.reserved, keys.prioritized]
  const finishedCount = async () => {
    let left = await redis.client.llen(keys.wait)
    for (const key of unfinishedSets) left += await redis.client.zcard(key)
    return N - left - (await redis.client.zcard(keys.schedulers))
  }

  // Chaos: SIGKILL (and respawn) or SIGSTOP for 100-1200 ms, every 100-400 ms, always leaving one worker running.
  const chaos = { kills: 0, pauses: 0, resumes: 0, respawns: 0, killedHolding: 0 }
  const pending: Promise<unknown>[] = []
  let finished = false
  const chaosLoop = (async () => {
    for (let action = 0; !finished; action++) {
      await pause(r.int(100, FULL ? 400 : 300))
      if (finished) break
      const running = [...live].filter((w) => !w.paused)
      if (running.length <= 1) continue
      const victim = r.pick(running)
      // The first two actions are one kill and one pause, so every run has both.
      const kill = action === 0 ? true : action === 1 ? false : r.next() < 0.5
      if (kill) {
        const holding =
          victim.messages.filter((m) => m.t === 's').length -
          victim.messages.filter((m) => m.t === 'c' || m.t === 'f' || m.t === 'l').length
        victim.proc.kill('SIGKILL')
        victim.killed = true
        live.delete(victim)
        chaos.kills++
        if (holding > 0) chaos.killedHolding++
        pending.push(spawn().then(() => chaos.respawns++))
      } else {
        victim.proc.kill('SIGSTOP')
        victim.paused = true
        chaos.pauses++
        pending.push(
          pause(r.int(100, 1200)).then(() => {
            victim.proc.kill('SIGCONT')
            victim.paused = false
            chaos.resumes++
          }),
        )
      }
    }
  })()

  try {
    await waitFor(async () => (await finishedCount()) === N, {
      timeoutMs: FULL ? 400_000 : 60_000,
      intervalMs: 100,
      what: `all ${N} jobs to finish`,
    })
  } finally {
    finished = true
    await chaosLoop
    await Promise.all(pending)
  }
  const runMs = Date.now() - t0
  sampling = false
  await sampler
  sweeping = false
  await Promise.all(sweepers)
  violations.push(...(await sample(redis.client)))
  const retired = await Promise.all(everyWorker.map((w) => retire(w)))

  // ---- The final state, read from the job hashes and the sets.
  const hashes = new Map<string, Record<string, string>>()
  for (let i = 0; i < N; i += 500) {
    const batch = ids.slice(i, i + 500)
    const replies = (await batch.reduce((p, id) => p.hgetall(keys.job(id)), redis.client.pipeline()).exec()) ?? []
    for (const [k, id] of batch.entries()) hashes.set(id, (replies[k]?.[1] ?? {}) as Record<string, string>)
  }
  const completed = new Set(await redis.client.zrange(keys.completed, '0', '-1'))
  const failed = new Set(await redis.client.zrange(keys.failed, '0', '-1'))
  const counts = await queue.counts()
  // The listener has read every entry once the stream's last id is its position.
  const lastId = (await redis.client.xrevrange(keys.events, '+', '-', 'COUNT', 1))[0]?.[0]
  await waitFor(() => heardCompleted.length >= completed.size && lastEvent === lastId, { what: 'the listener to catch up' })
  await listener.close()

  // ---- What the workers reported, per job.
  type Event = ChaosMessage & { pid: number; killed: boolean }
  const events = new Map<string, Event[]>()
  for (const w of everyWorker)
    for (const m of w.messages) if (m.id) events.set(m.id, [...(events.get(m.id) ?? []), { ...m, pid: w.pid, killed: w.killed }])
  const errors = everyWorker.flatMap((w) => w.messages.filter((m) => m.t === 'e'))

  const problems: string[] = []
  let lost = 0
  let removed = 0
  let unreportedCompletions = 0
  let unexplainedAttempts = 0
  let acceptedFails = 0
  let lockLost = 0
  let starts = 0
  for (const id of ids) {
    const h = hashes.get(id) ?? {}
    if (Object.keys(h).length === 0) {
      // Removed by retention: only a completed job is, and only once it was in `completed`.
      removed++
      const evs = events.get(id) ?? []
      starts += evs.filter((e) => e.t === 's').length
      const reported = evs.some((e) => e.t === 'c')
      const killedHolder = evs.some((e) => e.t === 's' && e.killed)
      if (completed.has(id) || failed.has(id)) problems.push(`${id}: removed, but still in completed or failed`)
      else if (!reported && !killedHolder) problems.push(`${id}: gone, and no run reported completing it`)
      continue
    }
    const state = h.state
    const inCompleted = completed.has(id)
    const inFailed = failed.has(id)
    // Absent until an attempt is used (a job the sweep failed for stalling may have used none), and on a job
    // completed by its first attempt: the codec's reading.
    const made = fieldsFromHash(id, h).attemptsMade
    // A stall uses no attempt: it is counted apart (stalledCounter), so a run ends in one of the two.
    const stalls = Number(h.stalledCounter ?? 0)
    const started = fieldsFromHash(id, h).attemptsStarted
    const evs = events.get(id) ?? []
    const ev = (t: string) => evs.filter((e) => e.t === t)
    starts += ev('s').length
    acceptedFails += ev('f').length
    lockLost += ev('l').length
    if (!inCompleted && !inFailed) lost++
    if (state === 'failed' && h.failedReason !== 'chaos: the processor failed' && !/stalled/.test(h.failedReason ?? ''))
      problems.push(`${id}: failed for an unexpected reason: ${h.failedReason}`)
    if (inCompleted && inFailed) problems.push(`${id}: in completed and failed`)
    if ((state === 'completed') !== inCompleted || (state === 'failed') !== inFailed)
      problems.push(`${id}: state ${state} but completed=${inCompleted} failed=${inFailed}`)
    // Every take ended in exactly one attempt (completion, failure) or one stall, except a run that gave up a
    // lease it could not renew (a paused worker) while still owning the job: it returned the job to wait
    // without charging an attempt. No graceful close released one.
    const gaveUp = ev('l').filter((e) => /could not be renewed/.test(e.msg ?? '')).length
    if (made + stalls > started || started - made - stalls > gaveUp)
      problems.push(`${id}: attemptsMade ${made}, stalls ${stalls}, attemptsStarted ${started}, leases given up ${gaveUp}`)
    // Each start number is handed out once.
    const startNumbers = ev('s').map((e) => e.n ?? 0)
    if (new Set(startNumbers).size !== startNumbers.length) problems.push(`${id}: start number logged twice: ${startNumbers.join(',')}`)
    if (startNumbers.some((n) => n < 1 || n > started))
      problems.push(`${id}: start numbers ${startNumbers.join(',')} beyond attemptsStarted ${started}`)
    // Runs ended: each by a completion, an accepted failure (attempts), or a sweep's recovery or failure
    // (stalls; once, though three sweepers overlap).
    const explained = (sweeps.recovered.get(id) ?? 0) + (sweeps.failed.get(id) ?? 0) + ev('f').length + (state === 'completed' ? 1 : 0)
    if (explained > made + stalls)
      problems.push(`${id}: ${explained} run ends reported (sweeps + failures + completion) but attemptsMade + stalls is ${made + stalls}`)
    else unexplainedAttempts += made + stalls - explained
    // A run fenced out (recovered or held by another token) can never own the job again.
    for (const lostEv of ev('l').filter((e) => !/could not be renewed/.test(e.msg ?? ''))) {
      const after = evs
        .slice(evs.indexOf(lostEv) + 1)
        .filter((e) => (e.t === 'c' || e.t === 'f') && e.pid === lostEv.pid && e.n === lostEv.n)
      if (after.length > 0)
        problems.push(
          `${id}: run ${lostEv.pid}#${lostEv.n} got lockLost ("${lostEv.msg}") and then its ${after[0]?.t === 'c' ? 'completion' : 'failure'} was accepted`,
        )
    }
    const completions = ev('c')
    if (state === 'completed') {
      let rv: { pid: number; n: number; wid: string } | undefined
      try {
        rv = JSON.parse(h.returnValue ?? 'null')
      } catch {
        rv = undefined
      }
      if (!rv) {
        problems.push(`${id}: completed without a returnValue`)
        continue
      }
      // The completing run was the last take: everything before it ended (recovered or failed) first.
      if (rv.n !== started) problems.push(`${id}: completed by start #${rv.n} but attemptsStarted is ${started}`)
      if (!evs.some((e) => e.t === 's' && e.pid === rv.pid && e.n === rv.n))
        problems.push(`${id}: completed by ${rv.pid}#${rv.n}, which never logged that start`)
      if (completions.length > 1) problems.push(`${id}: ${completions.length} completions accepted`)
      else if (completions.length === 1) {
        const c = completions[0] as Event
        if (c.pid !== rv.pid || c.n !== rv.n)
          problems.push(`${id}: completion accepted for ${c.pid}#${c.n} but returnValue is from ${rv.pid}#${rv.n}`)
      } else if (everyWorker.find((w) => w.pid === rv.pid)?.killed)
        unreportedCompletions++ // killed between the commit and the report
      else problems.push(`${id}: completed by ${rv.pid}#${rv.n}, which never reported it`)
    } else {
      if (completions.length > 0) problems.push(`${id}: ended ${state} but ${completions.length} completion(s) were accepted`)
      if (state === 'failed' && made !== ATTEMPTS && h.failedReason !== 'job stalled more than allowable limit')
        problems.push(`${id}: failed after ${made} of ${ATTEMPTS} attempts`)
    }
  }

  const summary = {
    seed: r.seed,
    jobs: N,
    workers: sizes.workers,
    concurrency: CONCURRENCY,
    runMs,
    completed: completed.size,
    failed: failed.size,
    starts,
    reRuns: starts - N,
    kills: chaos.kills,
    killsHoldingJobs: chaos.killedHolding,
    pauses: chaos.pauses,
    respawns: chaos.respawns,
    sweeps: sweeps.calls,
    sweepErrors: sweeps.errors,
    marked: sweeps.marked,
    recoveries: [...sweeps.recovered.values()].reduce((a, b) => a + b, 0),
    failedBySweep: [...sweeps.failed.values()].reduce((a, b) => a + b, 0),
    acceptedFails,
    lockLost,
    workerErrors: errors.length,
    samples,
    duplicates: violations.filter((v) => v.startsWith('duplicate')).length,
    overlaps: violations.filter((v) => !v.startsWith('duplicate')).length,
    lost,
    removedByRetention: removed,
    unreportedCompletions,
    unexplainedAttempts,
    closedCleanly: retired.filter((x) => x === 'bye').length,
    completedEvents: heardCompleted.length,
    progressEvents: heardProgress,
    problems: problems.length,
  }
  console.log(`[chaos] crash-load: ${JSON.stringify(summary)}`)
  if (problems.length > 0) console.log(`[chaos] crash-load problems (first 20):\n  ${problems.slice(0, 20).join('\n  ')}`)
  if (violations.length > 0) console.log(`[chaos] crash-load sample violations (first 20):\n  ${violations.slice(0, 20).join('\n  ')}`)

  expect(chaos.kills).toBeGreaterThan(0)
  expect(chaos.pauses).toBeGreaterThan(0)
  expect(summary.recoveries + summary.failedBySweep).toBeGreaterThan(0)
  expect(violations).toEqual([])
  expect(problems).toEqual([])
  expect(lost).toBe(0)
  // The scheduler made each of its iterations once, 100 ms apart, none skipped, and each finished once: it
  // completed (the completed events say so: retention may have removed it since), or a killed worker held it
  // past its maxStalledCount and the sweep failed it, as any job.
  const iterationIds = heardCompleted.filter((id) => id.startsWith('repeat:tick:'))
  const stalledOut = [...failed].filter((id) => id.startsWith('repeat:tick:'))
  for (const id of stalledOut) {
    expect(await redis.client.hget(keys.job(id), 'failedReason')).toBe('job stalled more than allowable limit')
    expect(iterationIds).not.toContain(id)
  }
  const dues = [...iterationIds, ...stalledOut].map((id) => Number(id.split(':')[2])).sort((a, b) => a - b)
  expect(dues).toHaveLength(ITERATIONS)
  expect(dues.slice(1).map((d, i) => d - (dues[i] as number))).toEqual(dues.slice(1).map(() => 100))
  expect(await queue.getJobScheduler('tick')).toBeUndefined()
  // Every completed event names a job that ended completed (or was removed by retention after it), once.
  const completedOrRemoved = ids.filter((id) => completed.has(id) || Object.keys(hashes.get(id) ?? {}).length === 0)
  expect(new Set(heardCompleted).size).toBe(heardCompleted.length)
  expect(heardCompleted.filter((id) => !id.startsWith('repeat:')).sort()).toEqual([...completedOrRemoved].sort())
  expect(heardProgress).toBeGreaterThan(0)
  expect(acceptedFails).toBeGreaterThan(0) // retries waited their backoff
  expect(removed).toBeGreaterThan(0) // retention removed completed jobs
  expect(completed.size).toBeLessThanOrEqual(keepCompleted + Math.max(10, Math.ceil(keepCompleted / 10)))
  // The scheduler's iterations share the finished sets: the plain jobs alone add up to N.
  const plain = (set: Set<string>) => [...set].filter((id) => !id.startsWith('repeat:')).length
  expect(plain(completed) + plain(failed) + removed).toBe(N)
  expect(counts).toEqual({ wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: completed.size, failed: failed.size })
  // Attempts no one reported can only be failures accepted just before a SIGKILL hid the report.
  expect(unexplainedAttempts).toBeLessThanOrEqual(chaos.kills)
})
