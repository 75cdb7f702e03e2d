/**
 * Flows under crashes: parents in one queue, their children in another, worked by processes SIGKILLed (and
 * respawned) and SIGSTOPped at random while three overlapping sweeper loops run on the children's queue
 * with short leases. A kill may land anywhere in a child's end: before its finish, between the finish
 * (the outbox entry written) and the telling of its parent, or after. Children fail at random and use
 * their attempts; one killed too often is failed by a sweep. Every child has a way to end that lets its
 * parent move on: ignoreDependencyOnFailure, removeDependencyOnFailure, or no policy with removeOnFail
 * (a failed child removed at once leaves its parent's dependencies); some are removed as they complete
 * (their entry outlives them). Flows are added while all this runs.
 * Counted at the end, per parent: run early (a dependency still pending when it started), run twice, or
 * never run; and the outbox must be empty. The parents' worker runs in this process, never killed, with a
 * long lease: a parent run twice is one released twice.
 */
import { afterAll, beforeAll, expect, it } from 'vitest'
import { FlowProducer, type Job, sweep, Worker } from '../../lib/index.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { startRedis, type TestRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { FULL, pause, rng, sizes } from './config.js'
import { type ChaosWorker, retire, spawnChaosWorker } from './workers.js'

const KIDS = 'kids'
const PARENTS = 'parents'
const kids = queueKeys('emq', KIDS)
const LOCK_MS = 400
const GRACE_MS = 50

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

type Rng = ReturnType<typeof rng>

/** A child's options: a way to end that lets its parent move on, some removed as they complete. */
function childOpts(r: Rng): Record<string, unknown> {
  const roll = r.next()
  const policy =
    roll < 0.6 ? { ignoreDependencyOnFailure: true } : roll < 0.8 ? { removeDependencyOnFailure: true } : { removeOnFail: true }
  return { attempts: 4, backoff: 20, ...policy, ...(r.next() < 0.3 ? { removeOnComplete: true } : {}) }
}

/** `count` flows of a parent with 1-4 children, ids from `from`. */
function flowsOf(r: Rng, from: number, count: number) {
  return Array.from({ length: count }, (_, k) => {
    const i = from + k
    return {
      name: 'parent',
      queueName: PARENTS,
      opts: { jobId: `p${i}` },
      children: Array.from({ length: r.int(1, 4) }, (_, c) => ({
        name: 'child',
        queueName: KIDS,
        data: { i, c },
        opts: { jobId: `p${i}c${c}`, ...childOpts(r) },
      })),
    }
  })
}

/** SIGKILL (and respawn; 70%) or SIGSTOP for 100-1200 ms a worker every 100-300 ms, always leaving one running. */
function chaosLoop(r: Rng, live: Set<ChaosWorker>, spawn: () => Promise<ChaosWorker>, done: () => boolean) {
  const chaos = { kills: 0, killedHolding: 0, pauses: 0, slowSpawns: 0 }
  const pending: Promise<unknown>[] = []
  const loop = (async () => {
    for (let action = 0; !done(); action++) {
      await pause(r.int(100, 300))
      const running = [...live].filter((w) => !w.paused)
      if (done() || running.length <= 1) continue
      const victim = r.pick(running)
      if (action === 0 || (action !== 1 && r.next() < 0.7)) {
        const ended = victim.messages.filter((m) => m.t === 'c' || m.t === 'f' || m.t === 'l').length
        if (victim.messages.filter((m) => m.t === 's').length > ended) chaos.killedHolding++
        victim.proc.kill('SIGKILL')
        victim.killed = true
        live.delete(victim)
        chaos.kills++
        // A respawn that outlasts its start timeout on a loaded machine leaves one worker fewer, not a failure.
        pending.push(spawn().catch(() => chaos.slowSpawns++))
      } else {
        victim.proc.kill('SIGSTOP')
        victim.paused = true
        chaos.pauses++
        pending.push(
          pause(r.int(100, 1200)).then(() => {
            victim.proc.kill('SIGCONT')
            victim.paused = false
          }),
        )
      }
    }
    await Promise.all(pending)
  })()
  return { chaos, loop }
}

it(`flows: ${sizes.workers} child worker processes killed and paused at random, 3 overlapping sweepers: no parent runs early, twice or never`, {
  timeout: FULL ? 600_000 : 120_000,
}, async () => {
  const r = rng()
  const P = Math.max(20, Math.floor(sizes.jobs / 5))
  const env = {
    REDIS_URL: redis.url,
    QUEUE: KIDS,
    LOCK_MS: String(LOCK_MS),
    HEARTBEAT_MS: '100',
    CONCURRENCY: FULL ? '4' : '2',
    WORK_MIN_MS: '2',
    WORK_MAX_MS: '40',
    FAIL_RATE: '0.2',
  }
  const live = new Set<ChaosWorker>()
  const spawn = async () => {
    const w = await spawnChaosWorker(env)
    everyWorker.push(w)
    live.add(w)
    return w
  }
  await Promise.all(Array.from({ length: sizes.workers }, spawn))

  // The parents' worker: each run records whether a dependency was still pending when it started.
  const runs = new Map<string, number>()
  const early: string[] = []
  // direct: the parents' worker lives in the test process for the whole run, never killed, its runs counted
  const parents = new Worker(
    PARENTS,
    async (job: Job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
      const counts = await job.getDependenciesCount()
      if ((counts.unprocessed ?? 0) > 0) early.push(`${job.id}: ${JSON.stringify(counts)}`)
      return counts
    },
    { connection: redis.url, concurrency: 8, lockDuration: 30_000 },
  )
  const parentErrors: string[] = []
  parents.on('error', (err) => parentErrors.push(err.message))

  const sweeps = { calls: 0, errors: 0, stallFailed: 0 }
  let sweeping = true
  const sweepers = [0, 1, 2].map(async () => {
    const client = redis.connect()
    while (sweeping) {
      try {
        sweeps.stallFailed += (await sweep(client, KIDS, { graceMs: GRACE_MS })).failed.length
        sweeps.calls++
      } catch (err) {
        sweeps.errors++
        console.error('[chaos flows] sweep failed:', (err as Error).message)
      }
      await pause(r.int(50, 150))
    }
  })

  let finished = false
  const { chaos, loop } = chaosLoop(r, live, spawn, () => finished)
  const producer = new FlowProducer({ connection: redis.url })
  const t0 = performance.now()
  let children = 0
  const BATCH = 20
  for (let i = 0; i < P; i += BATCH) {
    const flows = flowsOf(r, i, Math.min(BATCH, P - i))
    children += flows.reduce((n, f) => n + f.children.length, 0)
    await producer.addBulk(flows)
    await pause((sizes.seconds * 1000 * BATCH) / P)
  }
  const completedParents = () => redis.client.zcard(queueKeys('emq', PARENTS).completed)
  let never = 0
  try {
    await waitFor(async () => (await completedParents()) === P, {
      timeoutMs: FULL ? 400_000 : 90_000,
      intervalMs: 200,
      what: `all ${P} parents to complete`,
    })
  } catch {
    never = P - (await completedParents())
  } finally {
    finished = true
    await loop
  }
  const runMs = performance.now() - t0
  sweeping = false
  await Promise.all(sweepers)
  // A last sweep delivers what the last kills left; nothing may be left after it.
  await sweep(redis.client, KIDS, { graceMs: GRACE_MS })
  const left = await redis.client.hlen(kids.handoffs)
  await Promise.all(everyWorker.map((w) => retire(w)))
  await parents.close()
  await producer.close()

  const twice = [...runs].filter(([, n]) => n > 1).map(([id, n]) => `${id} x${n}`)
  const stallFailedKids = await redis.client.zcard(kids.failed)
  console.log(
    `[chaos flows] seed ${r.seed}: ${P} parents, ${children} children in ${Math.round(runMs)} ms; ${chaos.kills} kills ` +
      `(${chaos.killedHolding} holding a job), ${chaos.pauses} pauses, ${everyWorker.length} processes (${chaos.slowSpawns} too slow to start); ` +
      `${sweeps.calls} sweeps (${sweeps.errors} failed), ${sweeps.stallFailed} children failed by a sweep, ` +
      `${stallFailedKids} kept in failed; parents early ${early.length}, twice ${twice.length}, never ${never}; ` +
      `outbox left ${left}`,
  )
  expect(early).toEqual([])
  expect(twice).toEqual([])
  expect(never).toBe(0)
  expect(runs.size).toBe(P)
  expect(left).toBe(0)
  expect(parentErrors).toEqual([])
})
