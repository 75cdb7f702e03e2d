/**
 * `echomq demo`: the design document's scene with real worker processes over a fixed in-flight set.
 * Workers w1, w2, w3 each hold a few jobs; by default w1 is killed (SIGKILL), w2 paused (SIGSTOP) past its
 * lease and resumed (SIGCONT) before the second sweep, w3 healthy; one of the killed worker's jobs has
 * stalled once before, so this stall is one too many (maxStalledCount 1). Sweep 1 and sweep 2 each end
 * with a readout, one row per job.
 */
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { Queue, type SweepResult, sweep } from '../../lib/index.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { deleteUnderPrefix as deletePrefix, leaseStates, liveLeases, recordPastStalls } from '../../lib/redis/queries.js'
import { table } from '../format.js'
import { spawnWorker, type WorkerProcess } from '../support/worker-process.js'

export type Role = 'killed' | 'paused' | 'healthy'
export const WORKER_NAMES = ['w1', 'w2', 'w3'] as const

export interface DemoOptions {
  redisUrl: string
  /** True when the Redis is the demo's own: keys are left as they are. Otherwise they are removed. */
  ownRedis: boolean
  roles: Record<string, Role>
  jobsPerWorker: number
  leaseMs: number
  say: (text: string) => void
  progress: (text: string) => void
}

export interface DemoJob {
  id: string
  worker: Role
  sweep1: 'left alone' | 'marked'
  sweep2: 'left alone' | 'recovered' | 'failed'
  /** Stalls counted after sweep 2 (stalledCounter), as in the readout. */
  stalls: number
  finalAttemptsMade: number
  finalState: string
  /** The live worker that ran a recovered job again. */
  rerunBy?: string | undefined
}

interface Slot {
  id: string
  name: string
  role: Role
  /** Stalls before this run (1 for the job that stalls once too often). */
  stalledBefore: number
  process?: WorkerProcess
}

const verdict = (id: string, r: SweepResult) =>
  r.recovered.includes(id) ? 'recovered to wait' : r.failed.includes(id) ? 'failed' : r.marked.includes(id) ? 'marked' : 'left alone'

/** One demo run's parts, handed from phase to phase. */
interface Scene {
  o: DemoOptions
  prefix: string
  keys: ReturnType<typeof queueKeys>
  redis: Redis
  queue: Queue
  workers: Map<string, WorkerProcess>
  slots: Slot[]
  firstKilled: string | undefined
}

export async function runDemo(o: DemoOptions): Promise<DemoJob[]> {
  const prefix = o.ownRedis ? 'emq' : `emq-demo-${randomBytes(3).toString('hex')}`
  const redis = new Redis(o.redisUrl, { maxRetriesPerRequest: 1 })
  redis.on('error', () => undefined)
  const scene: Scene = {
    o,
    prefix,
    keys: queueKeys(prefix, 'demo'),
    redis,
    queue: new Queue('demo', { connection: redis, prefix }),
    workers: new Map(),
    slots: [],
    firstKilled: Object.entries(o.roles).find(([, r]) => r === 'killed')?.[0],
  }
  try {
    await startWorkers(scene)
    const first = await silenceAndSweep(scene)
    const second = await resumeAndSweep(scene)
    const afterSweep2 = new Map<string, number>()
    for (const s of scene.slots) afterSweep2.set(s.id, (await scene.queue.getJob(s.id))?.stalledCounter ?? 0)
    o.say('\nsweep 2 (the paused worker renewed in time)')
    o.say(await readout(redis, scene.queue, scene.keys, scene.slots, second))
    const rerun = await finishLive(scene, second)
    return await report(scene, first, second, afterSweep2, rerun)
  } finally {
    await Promise.all(
      [...scene.workers.values()].map((w) => {
        w.kill('SIGCONT')
        return w.stop()
      }),
    )
    if (!o.ownRedis) await deletePrefix(redis, prefix)
    await scene.queue.close()
    redis.disconnect()
  }
}

/** Three worker processes, each holding its jobs; the first killed worker's last job has stalled before. */
async function startWorkers({ o, prefix, redis, keys, queue, workers, slots, firstKilled }: Scene): Promise<void> {
  o.progress('starting three worker processes')
  let n = 0
  for (const name of WORKER_NAMES) {
    const role = o.roles[name] ?? 'healthy'
    const count = o.jobsPerWorker + (name === firstKilled ? 1 : 0)
    const mine = Array.from({ length: count }, (_, i) => ({
      id: `job-${++n}`,
      name,
      role,
      stalledBefore: name === firstKilled && i === count - 1 ? 1 : 0,
    }))
    const w = await spawnWorker({
      REDIS_URL: o.redisUrl,
      QUEUE: 'demo',
      PREFIX: prefix,
      LOCK_MS: String(o.leaseMs),
      HEARTBEAT_MS: String(Math.floor(o.leaseMs / 4)),
      CONCURRENCY: String(count),
    })
    workers.set(name, w)
    for (const s of mine) {
      await queue.add('send-email', { to: `${s.id}@example.com` }, { jobId: s.id, attempts: 3 })
      if (s.stalledBefore > 0) await recordPastStalls(redis, keys, s.id, s.stalledBefore)
    }
    await Promise.all(mine.map((s) => w.waitForMessage('active', s.id)))
    slots.push(...mine)
  }
  o.say(
    `${slots.length} jobs in flight on 3 workers (lease ${o.leaseMs} ms, heartbeat ${Math.floor(o.leaseMs / 4)} ms); ` +
      (firstKilled ? `${firstKilled}'s last job has stalled once before (maxStalledCount 1)` : 'no worker is killed'),
  )
}

/** Kills and pauses workers by their roles, waits out their leases, then sweep 1. */
async function silenceAndSweep({ o, prefix, redis, keys, queue, workers, slots }: Scene): Promise<SweepResult> {
  for (const [name, w] of workers) {
    if (o.roles[name] === 'killed') w.kill('SIGKILL')
    if (o.roles[name] === 'paused') w.kill('SIGSTOP')
  }
  const silenced = slots.filter((s) => s.role !== 'healthy').map((s) => s.id)
  o.say(`\nkilled: ${names(o.roles, 'killed')}; paused: ${names(o.roles, 'paused')}; healthy: ${names(o.roles, 'healthy')}`)
  o.progress('waiting for the silent workers\u2019 leases to lapse')
  await until(async () => (await liveLeases(redis, keys, silenced)) === 0, o.leaseMs * 4)
  const first = await sweep(redis, 'demo', { prefix, graceMs: 0 })
  o.say('\nsweep 1')
  o.say(await readout(redis, queue, keys, slots, first))
  return first
}

/** Resumes the paused worker, waits for its heartbeat, then sweep 2. */
async function resumeAndSweep({ o, prefix, redis, keys, workers, slots }: Scene): Promise<SweepResult> {
  for (const [name, w] of workers) if (o.roles[name] === 'paused') w.kill('SIGCONT')
  const paused = slots.filter((s) => s.role === 'paused').map((s) => s.id)
  o.progress('paused worker resumed; waiting for its heartbeat')
  await until(async () => (await liveLeases(redis, keys, paused)) === paused.length, o.leaseMs * 4)
  return sweep(redis, 'demo', { prefix, graceMs: 0 })
}

/** The live workers finish their jobs, then take the recovered ones again; which worker reran which job. */
async function finishLive({ o, workers, slots }: Scene, second: SweepResult): Promise<Map<string, string>> {
  o.progress('letting the live workers finish')
  for (const s of slots) {
    const w = workers.get(s.name)
    if (s.role !== 'killed' && w) w.finish(s.id)
  }
  await Promise.all(slots.filter((s) => s.role !== 'killed').map((s) => workers.get(s.name)?.waitForMessage('completed', s.id)))
  // Recovered jobs are served next: a live worker takes them again (at-least-once), and finishes them.
  const live = [...workers].filter(([name]) => o.roles[name] !== 'killed')
  const rerun = new Map<string, string>()
  if (live.length === 0) return rerun
  o.progress('a live worker takes the recovered jobs again')
  await Promise.all(
    second.recovered.map(async (id) => {
      await until(async () => live.some(([, w]) => w.active().includes(id)), o.leaseMs * 4)
      const [name, w] = live.find(([, w]) => w.active().includes(id)) ?? []
      if (!name || !w) return
      rerun.set(id, name)
      w.finish(id)
      await w.waitForMessage('completed', id)
    }),
  )
  return rerun
}

async function report(
  { o, queue, slots }: Scene,
  first: SweepResult,
  second: SweepResult,
  afterSweep2: Map<string, number>,
  rerun: Map<string, string>,
): Promise<DemoJob[]> {
  const result: DemoJob[] = []
  for (const s of slots) {
    const job = await queue.getJob(s.id)
    result.push({
      id: s.id,
      worker: s.role,
      sweep1: first.marked.includes(s.id) ? 'marked' : 'left alone',
      sweep2: second.recovered.includes(s.id) ? 'recovered' : second.failed.includes(s.id) ? 'failed' : 'left alone',
      stalls: afterSweep2.get(s.id) ?? 0,
      finalAttemptsMade: job?.attemptsMade ?? 0,
      finalState: job?.state ?? 'missing',
      ...(rerun.has(s.id) ? { rerunBy: rerun.get(s.id) } : {}),
    })
  }
  const counts = await queue.counts()
  o.say(
    `\ncounts: wait ${counts.wait}, active ${counts.active}, stalled ${counts.stalled}, completed ${counts.completed}, failed ${counts.failed}`,
  )
  o.say(
    table(
      ['job', 'worker', 'what happened'],
      result.map((j) => [j.id, `${slots.find((s) => s.id === j.id)?.name} (${j.worker})`, story(j)]),
    ),
  )
  return result
}

function names(roles: Record<string, Role>, role: Role): string {
  return WORKER_NAMES.filter((n) => (roles[n] ?? 'healthy') === role).join(', ') || 'none'
}

function story(j: DemoJob): string {
  if (j.sweep2 === 'recovered') {
    const again = j.rerunBy ? `, run again by ${j.rerunBy}: ${j.finalState}` : ''
    return `worker died; marked, then recovered to wait${again} (stalls: ${j.stalls}, attempts used: ${j.finalAttemptsMade})`
  }
  if (j.sweep2 === 'failed') return `worker died; stalled once too often (stalls: ${j.stalls}): failed`
  if (j.sweep1 === 'marked') return `worker paused past its lease; marked, renewed before sweep 2, ${j.finalState}`
  return `lease kept alive; left alone, ${j.finalState}`
}

async function readout(
  redis: Redis,
  queue: Queue,
  keys: ReturnType<typeof queueKeys>,
  slots: Slot[],
  result: SweepResult,
): Promise<string> {
  const rows: string[][] = []
  for (const s of slots) {
    const [[lease], job] = await Promise.all([leaseStates(redis, keys, [s.id]), queue.getJob(s.id)])
    const ttl = lease?.ttlMs ?? -2
    rows.push([
      s.id,
      `${s.name} (${s.role})`,
      ttl > 0 ? `alive, ${ttl} ms left` : 'lapsed',
      verdict(s.id, result),
      `${job?.attemptsMade ?? 0}/${job?.attempts ?? 0}`,
      String(job?.stalledCounter ?? 0),
    ])
  }
  return table(['job', 'worker', 'lease', 'verdict', 'attempts', 'stalls'], rows)
}

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + Math.max(timeoutMs, 5_000)
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('the demo timed out waiting for a lease to change')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
