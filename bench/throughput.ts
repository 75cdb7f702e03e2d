/**
 * Throughput: M no-op jobs added first (or, in the producer rows, added by a producer process while the
 * workers run: bench/throughput-producer.ts, one add at a time with PRODUCER_WINDOW in flight, as a web
 * server adds jobs), then workers run until all M have completed, with each side's
 * default options except where noted: in this process with concurrency 1 and 50, and in PROCESSES child
 * processes (bench/throughput-worker.ts) with concurrency 50 each. Three sides, alternating, ROUNDS
 * times: EchoMQ with its defaults (retention on: the last 1,000 completed kept), EchoMQ with retention
 * off (removeOnComplete: false) right after it, and BullMQ with its defaults (keeps every completed job);
 * then RETENTION_PAIRS - ROUNDS more pairs of the two EchoMQ sides, retention off first, so the cost of
 * retention (it only starts trimming past 1,000 completed jobs) is the median of RETENTION_PAIRS pairs.
 * Each library runs once unmeasured first, in this process and in the children.
 *
 * jobs/s on the client clock: in this process from starting the worker to the last 'completed' event; with
 * processes from the first worker started to the last job completed, by Date.now in each process (one
 * machine, one clock; this process polls `wait` and the in-flight set until both are empty, then stops
 * the workers and collects their times and counts). From Redis: script calls per job (EVALSHA/EVAL in
 * INFO commandstats) and Redis CPU per job (INFO cpu, user + sys); from the worker processes, their CPU
 * per job (process.cpuUsage: this process, or the children from run to stop).
 */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import type { Redis } from 'ioredis'
import { killAndWait } from '../cli/support/worker-process.js'
import { Worker } from '../lib/index.js'
import { queueKeys } from '../lib/redis/keys.js'
import { BULL_PREFIX, bullAddMany, bullConnection, bullKey, EMQ_PREFIX, emqAddMany } from './build.js'
import { fmt, fs, type Target, table, xs } from './format.js'
import { commandStats, redisCpuUs, resetStats, SCRIPT_CMDS, subtract, sum, withoutMeter } from './meter.js'
import type { ProducedMessage, ProduceMessage } from './throughput-producer.js'
import type { RunMessage, StoppedMessage } from './throughput-worker.js'
import { alternate, type Ctx, completion, queueTarget, ROUNDS, ratios, type Spread, sleep, spread, spreadOf, watchWorker } from './util.js'

const PROCESSES = 4
const CHILD = fileURLToPath(new URL('./throughput-worker.ts', import.meta.url))
const PRODUCER = fileURLToPath(new URL('./throughput-producer.ts', import.meta.url))
/** The producer's adds in flight. */
const PRODUCER_WINDOW = 50
const TIMEOUT_MS = 180_000
/**
 * Pairs of pre-added EchoMQ runs, retention on and off, behind the retention cost: ROUNDS in the
 * alternating rounds, the rest added. One run's jobs/s varies by a tenth or more on this machine, more
 * than retention costs (a trim of 100 jobs every 100 finishes), so the median of 3 pairs swung by as much.
 */
const RETENTION_PAIRS = 6

export interface ThroughputRun {
  jobs: number
  ms: number
  jobsPerSec: number
  scriptCallsPerJob: number
  redisCpuUsPerJob: number
  /** CPU the worker processes (this one, or the children) used per job. */
  clientCpuUsPerJob: number
}

export interface ThroughputSide {
  runs: ThroughputRun[]
  jobsPerSec: Spread
  redisCpuUsPerJob: Spread
  clientCpuUsPerJob: Spread
  scriptCallsPerJob: Spread
}

export interface ThroughputRow {
  concurrency: number
  processes: number
  jobs: number
  /** Jobs added before the workers start, or by a producer process while they run. */
  mode: 'pre' | 'producer'
  /** EchoMQ with its defaults (retention on). */
  emq: ThroughputSide
  bull: ThroughputSide
  /** EchoMQ with retention off (removeOnComplete: false): pre-added rows only. */
  emqKeep?: ThroughputSide
  ratio: Spread
  ratioKeep?: Spread
  /** 1 - jobs/s with retention / jobs/s without, run by run. */
  retentionCost?: Spread
}

export interface ThroughputResults {
  retention: { emq: string; emqKeep: string; bull: string }
  rows: ThroughputRow[]
}

type Side = 'emq' | 'bull' | 'emqKeep'

/** `run` resolves with its own time and client CPU (children), or undefined: this process's are taken. */
async function measure(meter: Redis, jobs: number, run: () => Promise<{ ms: number; cpuUs?: number } | undefined>): Promise<ThroughputRun> {
  await resetStats(meter)
  const before = await commandStats(meter)
  const cpu0 = await redisCpuUs(meter)
  const client0 = process.cpuUsage()
  const t0 = performance.now()
  const reported = await run()
  const ms = reported?.ms ?? performance.now() - t0
  const client = process.cpuUsage(client0)
  const clientCpuUs = reported?.cpuUs ?? client.user + client.system
  const cpu = (await redisCpuUs(meter)) - cpu0
  const stats = withoutMeter(subtract(await commandStats(meter), before))
  return {
    jobs,
    ms: Math.round(ms),
    jobsPerSec: Math.round((jobs / ms) * 1000),
    scriptCallsPerJob: sum(stats, SCRIPT_CMDS).calls / jobs,
    redisCpuUsPerJob: cpu / jobs,
    clientCpuUsPerJob: clientCpuUs / jobs,
  }
}

/** A fresh server with the jobs of one run added (none when a producer adds them). */
async function prepare(ctx: Ctx, side: Side, queue: string, jobs: number, producer?: Child): Promise<void> {
  await ctx.redis.meter.flushall()
  if (producer) return
  if (side === 'bull') {
    const q = new BullQueue(queue, { connection: bullConnection(ctx.redis.host, ctx.redis.port), prefix: BULL_PREFIX })
    await bullAddMany(q, jobs)
    await q.close()
  } else {
    const client = ctx.redis.connect(`emq-throughput-add`)
    await emqAddMany(client, queue, jobs, side === 'emqKeep' ? { defaultJobOptions: { removeOnComplete: false } } : {})
    client.disconnect()
  }
}

/** Tells the producer to add `jobs` jobs to `queue` now; resolves with its report once it added them all. */
async function produce(ctx: Ctx, producer: Child, side: Side, queue: string, jobs: number): Promise<ProducedMessage> {
  const lib = side === 'bull' ? 'bull' : 'emq'
  const m: ProduceMessage = {
    type: 'produce',
    ...queueTarget(ctx, lib, queue),
    jobs,
    window: PRODUCER_WINDOW,
  }
  producer.process.send(m)
  const report = (await producer.next('produced', TIMEOUT_MS)) as ProducedMessage
  if (report.errors.length) throw new Error(`${side} producer: ${report.errors.slice(0, 3).join('; ')}`)
  return report
}

/** One worker in this process; with `producer`, the jobs are added while it runs. */
async function inProcess(ctx: Ctx, side: Side, concurrency: number, jobs: number, producer?: Child): Promise<ThroughputRun> {
  const queue = `tp-${side}-${concurrency}`
  await prepare(ctx, side, queue, jobs, producer)
  const done = completion(jobs, `${side} throughput`, TIMEOUT_MS)
  let lastAt = 0
  const one = done.one
  done.one = () => {
    lastAt = Date.now()
    one()
  }
  // From the producer's first add to the last completion (one machine: Date.now is shared).
  const produced = async () => {
    const report = await produce(ctx, producer as Child, side, queue, jobs)
    await done.promise
    return { ms: lastAt - report.startedAt }
  }
  if (side === 'bull') {
    const worker = new BullWorker(queue, async () => null, {
      connection: bullConnection(ctx.redis.host, ctx.redis.port),
      prefix: BULL_PREFIX,
      concurrency,
      autorun: false,
    })
    watchWorker(worker, done.one, done.fail)
    await worker.waitUntilReady()
    try {
      return await measure(ctx.redis.meter, jobs, async () => {
        void worker.run().catch(done.fail)
        if (producer) return produced()
        await done.promise
        return undefined
      })
    } finally {
      await worker.close()
    }
  }
  const client = ctx.redis.connect(`emq-throughput-${concurrency}`)
  let worker: Worker | undefined
  const start = async () => {
    worker = new Worker(queue, async () => null, { connection: client, prefix: EMQ_PREFIX, concurrency })
    watchWorker(worker, done.one, done.fail)
    await worker.waitUntilReady()
  }
  try {
    // With a producer the worker is up and idle first, as a deployed one is.
    if (producer) await start()
    return await measure(ctx.redis.meter, jobs, async () => {
      if (producer) return produced()
      await start()
      await done.promise
      return undefined
    })
  } finally {
    await worker?.close()
    client.disconnect()
  }
}

export interface Child {
  process: ChildProcess
  next(type: string, timeoutMs?: number): Promise<unknown>
}

/** Forks a worker process (`file`, run with tsx; bench/throughput-worker.ts by default) and waits for its 'ready'. */
export async function spawnChild(file = CHILD): Promise<Child> {
  const child = fork(file, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const inbox: { type: string }[] = []
  const waiters: (() => void)[] = []
  child.on('message', (m: { type: string }) => {
    inbox.push(m)
    for (const wake of waiters.splice(0)) wake()
  })
  const next = async (type: string, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const i = inbox.findIndex((m) => m.type === type)
      if (i >= 0) return inbox.splice(i, 1)[0]
      if (child.exitCode !== null) throw new Error(`worker process ${file} exited (${child.exitCode}) before '${type}'`)
      if (Date.now() > deadline) throw new Error(`worker process ${file}: no '${type}' within ${timeoutMs} ms`)
      await new Promise<void>((resolve) => {
        waiters.push(resolve)
        setTimeout(resolve, 100)
      })
    }
  }
  await next('ready')
  return { process: child, next }
}

/** PROCESSES child processes, concurrency each; done when nothing is waiting (reserved ids included) or in flight. */
async function inProcesses(
  ctx: Ctx,
  children: Child[],
  side: Side,
  concurrency: number,
  jobs: number,
  producer?: Child,
): Promise<ThroughputRun> {
  const queue = `tp-${side}-p${children.length}`
  await prepare(ctx, side, queue, jobs, producer)
  const lib = side === 'bull' ? 'bull' : 'emq'
  const k = queueKeys(EMQ_PREFIX, queue)
  const [waitKey, activeKey] = lib === 'bull' ? [bullKey(queue, 'wait'), bullKey(queue, 'active')] : [k.wait, k.active]
  const { meter } = ctx.redis
  // EchoMQ's waiting jobs include the ids busy workers reserved ahead (and those with a priority).
  const left = async () => {
    if (lib === 'bull') return (await meter.llen(waitKey)) + (await meter.llen(activeKey))
    const [wait, active, reserved, prioritized] = await Promise.all([
      meter.llen(waitKey),
      meter.zcard(activeKey),
      meter.zcard(k.reserved),
      meter.zcard(k.prioritized),
    ])
    return wait + active + reserved + prioritized
  }
  let stopped: StoppedMessage[] = []
  const run = await measure(meter, jobs, async () => {
    const msg: RunMessage = {
      type: 'run',
      ...queueTarget(ctx, lib, queue),
      concurrency,
    }
    for (const c of children) c.process.send(msg)
    const deadline = Date.now() + TIMEOUT_MS
    let report: ProducedMessage | undefined
    if (producer) {
      // The workers up and idle first (each blocked on its queue's marker), as deployed ones are.
      while (Number(/blocked_clients:(\d+)/.exec(await meter.info('clients'))?.[1] ?? 0) < children.length) {
        if (Date.now() > deadline) throw new Error(`${side} throughput: workers not idle after ${TIMEOUT_MS} ms`)
        await sleep(10)
      }
      void produce(ctx, producer, side, queue, jobs).then((r) => (report = r))
    }
    while ((producer && !report) || (await left()) > 0) {
      if (Date.now() > deadline) throw new Error(`${side} throughput in processes: jobs left after ${TIMEOUT_MS} ms`)
      await sleep(10)
    }
    for (const c of children) c.process.send({ type: 'stop' })
    stopped = (await Promise.all(children.map((c) => c.next('stopped')))) as StoppedMessage[]
    const startedAt = report?.startedAt ?? Math.min(...stopped.map((s) => s.startedAt))
    return { ms: Math.max(...stopped.map((s) => s.lastAt)) - startedAt, cpuUs: stopped.reduce((n, s) => n + s.cpuUs, 0) }
  })
  const done = stopped.reduce((n, s) => n + s.done, 0)
  const errors = stopped.flatMap((s) => s.errors)
  if (done !== jobs || errors.length)
    throw new Error(`${side} throughput in processes: ${done} of ${jobs} completed; ${errors.slice(0, 3).join('; ')}`)
  return run
}

const summary = (runs: ThroughputRun[]): ThroughputSide => ({
  runs,
  jobsPerSec: spreadOf(runs, (r) => r.jobsPerSec),
  redisCpuUsPerJob: spreadOf(runs, (r) => r.redisCpuUsPerJob),
  clientCpuUsPerJob: spreadOf(runs, (r) => r.clientCpuUsPerJob),
  scriptCallsPerJob: spreadOf(runs, (r) => r.scriptCallsPerJob),
})

export async function runThroughput(ctx: Ctx): Promise<ThroughputResults> {
  const cases = ctx.quick
    ? [
        { concurrency: 1, processes: 0, jobs: 300 },
        { concurrency: 50, processes: 0, jobs: 1_500 },
        { concurrency: 50, processes: PROCESSES, jobs: 3_000 },
      ]
    : [
        { concurrency: 1, processes: 0, jobs: 3_000 },
        { concurrency: 50, processes: 0, jobs: 10_000 },
        { concurrency: 50, processes: PROCESSES, jobs: 20_000 },
      ]
  const warmUp = ctx.quick ? 200 : 500
  const rows: ThroughputRow[] = []
  let children: Child[] = []
  const producer = await spawnChild(PRODUCER)
  try {
    // Unmeasured: each library's code compiled and warmed up once, in this process and in the children.
    for (const side of ['emq', 'bull'] as const) await inProcess(ctx, side, 50, warmUp)
    for (const side of ['emq', 'bull'] as const) await inProcess(ctx, side, 50, warmUp, producer)
    for (const { concurrency, processes, jobs } of cases) {
      if (processes > 0 && children.length === 0) {
        children = await Promise.all(Array.from({ length: processes }, () => spawnChild()))
        for (const side of ['emq', 'bull'] as const) await inProcesses(ctx, children, side, concurrency, warmUp)
      }
      const one = (side: Side, from?: Child) => () =>
        processes > 0 ? inProcesses(ctx, children, side, concurrency, jobs, from) : inProcess(ctx, side, concurrency, jobs, from)
      // EchoMQ with and without retention run back to back in every round, so each pair sees the same
      // spell of the machine; the extra pairs run in the other order, so neither side always goes second.
      const pre = await alternate(ROUNDS, { emq: one('emq'), emqKeep: one('emqKeep'), bull: one('bull') })
      const extra = await alternate(RETENTION_PAIRS - ROUNDS, { emqKeep: one('emqKeep'), emq: one('emq') })
      const withRetention = [...pre.emq, ...extra.emq]
      const withoutRetention = [...pre.emqKeep, ...extra.emqKeep]
      rows.push({
        concurrency,
        processes,
        jobs,
        mode: 'pre',
        emq: summary(pre.emq),
        bull: summary(pre.bull),
        emqKeep: summary(pre.emqKeep),
        ratio: ratios(pre.emq, pre.bull, (r) => r.jobsPerSec),
        ratioKeep: ratios(pre.emqKeep, pre.bull, (r) => r.jobsPerSec),
        retentionCost: spread(withRetention.map((r, i) => 1 - r.jobsPerSec / (withoutRetention[i]?.jobsPerSec ?? Number.NaN))),
      })
      const fed = await alternate(ROUNDS, { emq: one('emq', producer), bull: one('bull', producer) })
      rows.push({
        concurrency,
        processes,
        jobs,
        mode: 'producer',
        emq: summary(fed.emq),
        bull: summary(fed.bull),
        ratio: ratios(fed.emq, fed.bull, (r) => r.jobsPerSec),
      })
      for (const row of rows.slice(-2)) {
        ctx.log(
          `throughput ${label(row)} M=${jobs}: EchoMQ ${fs(row.emq.jobsPerSec)} jobs/s, BullMQ ${fs(row.bull.jobsPerSec)}` +
            `${row.emqKeep ? `, EchoMQ retention off ${fs(row.emqKeep.jobsPerSec)}` : ''}; ratio ${xs(row.ratio)}`,
        )
      }
    }
  } finally {
    for (const c of [...children, producer]) c.process.send({ type: 'exit' })
    await Promise.all([...children, producer].map((c) => sleep(500).then(() => killAndWait(c.process))))
  }
  await ctx.redis.meter.flushall()
  return {
    retention: {
      emq: 'EchoMQ defaults: last 1,000 completed kept for a day',
      emqKeep: 'removeOnComplete: false (every completed job kept)',
      bull: 'BullMQ defaults: every completed job kept',
    },
    rows,
  }
}

const percent = (fraction: number) => `${fmt(fraction * 100, 1)}%`

const label = (t: ThroughputRow) =>
  `${t.processes ? `c=${t.concurrency} x ${t.processes} processes` : `c=${t.concurrency}`}, ${t.mode === 'pre' ? 'pre-added' : 'producer'}`

export function throughputReport(r: ThroughputResults): string {
  return (
    `Throughput: no-op jobs, pre-added, or added by a producer process (${PRODUCER_WINDOW} adds in flight) while the workers run; ` +
    `jobs/s median (min-max) of ${ROUNDS} alternating runs (EchoMQ, pre-added EchoMQ with retention off, BullMQ); ` +
    'CPU per job: Redis (INFO cpu) / the worker processes (process.cpuUsage; in this process it includes the event handlers)\n' +
    table(
      [
        'workers',
        'jobs',
        'EMQ jobs/s',
        'EMQ Redis/client CPU µs/job',
        'EMQ scripts/job',
        'Bull jobs/s',
        'Bull Redis/client CPU µs/job',
        'Bull scripts/job',
        'EMQ no-retention jobs/s',
        'ratio jobs/s',
        'ratio no-retention',
        'retention cost',
      ],
      r.rows.map((t) => [
        label(t),
        fmt(t.jobs),
        fs(t.emq.jobsPerSec),
        `${fmt(t.emq.redisCpuUsPerJob.median, 1)} / ${fmt(t.emq.clientCpuUsPerJob.median, 1)}`,
        fmt(t.emq.scriptCallsPerJob.median, 2),
        fs(t.bull.jobsPerSec),
        `${fmt(t.bull.redisCpuUsPerJob.median, 1)} / ${fmt(t.bull.clientCpuUsPerJob.median, 1)}`,
        fmt(t.bull.scriptCallsPerJob.median, 2),
        t.emqKeep ? fs(t.emqKeep.jobsPerSec) : '',
        xs(t.ratio),
        t.ratioKeep ? xs(t.ratioKeep) : '',
        t.retentionCost ? `${percent(t.retentionCost.median)} (${percent(t.retentionCost.min)} to ${percent(t.retentionCost.max)})` : '',
      ]),
    ) +
    `\n   retention: EMQ = ${r.retention.emq}; EMQ no-retention = ${r.retention.emqKeep}; Bull = ${r.retention.bull}.` +
    `\n   ratio = EchoMQ (defaults) / BullMQ (defaults); retention cost = 1 - EMQ / EMQ no-retention, pair by pair: median (min to max) of ${RETENTION_PAIRS} back-to-back pairs,` +
    ` ${ROUNDS} from the rounds above (retention on first) and ${RETENTION_PAIRS - ROUNDS} more (retention off first).`
  )
}

export function throughputTargets(r: ThroughputResults): Target[] {
  return r.rows.flatMap((t) => {
    const ratio: Target = {
      name: `throughput ${label(t)}: jobs/s >= 1.2x BullMQ (each with its default retention)`,
      pass: t.ratio.median >= 1.2,
      figures:
        `${fmt(t.emq.jobsPerSec.median)} vs ${fmt(t.bull.jobsPerSec.median)} jobs/s = ${xs(t.ratio)}` +
        (t.ratioKeep ? `; with retention off ${xs(t.ratioKeep)}` : ''),
    }
    if (!t.emqKeep || !t.retentionCost) return [ratio]
    return [
      ratio,
      {
        name: `throughput ${label(t)}: retention costs <= 10% of jobs/s`,
        pass: t.retentionCost.median <= 0.1,
        figures:
          `${fmt(t.emq.jobsPerSec.median)} vs ${fmt(t.emqKeep.jobsPerSec.median)} jobs/s with it off = ${percent(t.retentionCost.median)} ` +
          `(${percent(t.retentionCost.min)} to ${percent(t.retentionCost.max)}, ${t.retentionCost.runs.length} pairs); ` +
          // CPU per job moves less with the machine's load than jobs/s: what retention costs each side.
          `CPU µs/job with it on vs off: Redis ${fmt(t.emq.redisCpuUsPerJob.median, 1)} vs ${fmt(t.emqKeep.redisCpuUsPerJob.median, 1)}, ` +
          `client ${fmt(t.emq.clientCpuUsPerJob.median, 1)} vs ${fmt(t.emqKeep.clientCpuUsPerJob.median, 1)}`,
      },
    ]
  })
}
