/**
 * The reaper's pass over Q registered queues, two cases: each queue holds one waiting job (added with
 * Queue.add, one Queue per queue, which also registers it), and each queue is empty (registered only, as
 * bench/queues.ts). The reaper runs as the Lambda runs it: createReaper with metrics on (EMF, whose lines
 * are kept off the bench's output), so its sweeps read the failed-job count to claim (lib/reaper/failures.ts),
 * its own connection, one sweep per invocation; its first run (a cold start: connection, eviction-policy check,
 * discovery's scan) is apart, then WARM_RUNS timed runs. Per run: wall time of reaper.run(); commands the
 * reaper's connection sent (counted on the client, bench/count.ts); and INFO commandstats deltas over the
 * run (CONFIG RESETSTAT before; the meter's own commands left out): script calls, which are always sent by
 * a client, and every command Redis executed, those run inside the scripts included. Commands per queue
 * leave out the registry read (SMEMBERS) and the connection's PING, once per run.
 *
 * Oldest-wait age: the reaper's summary line names the queue with the oldest waiting job
 * (`oldestWaitQueue`) and its age (`oldestWaitAgeMs`; idle queues have no line of their own). In the last
 * warm run that age is checked against what it must be for that queue, by this process's clock (Redis
 * runs on the same machine): at least (run start - the add's reply) and at most (run end - the add's call),
 * +- AGE_SLACK_MS for the two clocks' millisecond rounding, and at least (run start - the first add's reply),
 * so the queue named is one of the oldest; the window is a run wide. Then, AGE_CHECKS times, a fresh queue
 * gets one job, waits a while, and the reaper runs over that queue alone: the bounds are then a few ms
 * wide, and the age's distance to their middle is reported.
 */
import type { Redis } from 'ioredis'
import { Queue } from '../lib/index.js'
import { reaperConfig } from '../lib/reaper/config.js'
import { createReaper, type Log } from '../lib/reaper/reaper.js'
import { registerQueue } from '../lib/registry.js'
import { EMQ_PREFIX } from './build.js'
import { SentCommands, UNLABELLED } from './count.js'
import { commandList, fmt, fs, type Target, table } from './format.js'
import { commandStats, resetStats, SCRIPT_CMDS, subtract, sum, withoutMeter } from './meter.js'
import { type Ctx, payload, type Spread, sleep, spreadOf } from './util.js'

const WARM_RUNS = 3
const TARGET_RUN_MS = 1_000
/** Queues set up at once. */
const IN_FLIGHT = 500
const AGE_SLACK_MS = 2
const AGE_CHECKS = 5
const TARGET_SENT = { waiting: 2, empty: 1 } as const

type Kind = 'waiting' | 'empty'

export interface ReaperRun {
  ms: number
  sent: Record<string, number>
  /** INFO commandstats calls over the run, by command (script-inner commands included). */
  executed: Record<string, number>
  /** Sent per queue, leaving out the registry read and the ping. */
  sentPerQueue: number
  /** Script calls per queue (commandstats). */
  scriptsPerQueue: number
  /** Every command Redis executed per queue, inside scripts too (commandstats). */
  executedPerQueue: number
  errors: number
}

export interface AgeCheck {
  ageMs: number
  /** What the age must lie within, by this process's clock. */
  lowMs: number
  highMs: number
  /** Age minus the middle of [low, high]. */
  offMs: number
}

export interface ReaperCase {
  kind: Kind
  queues: number
  coldMs: number
  coldSent: Record<string, number>
  runs: ReaperRun[]
  warmMs: Spread
  sentPerQueue: number
  scriptsPerQueue: number
  executedPerQueue: number
  /** The last warm run: queues whose age is reported, and those outside the bounds. */
  ages?: { reported: number; outside: number; minMs: number; maxMs: number }
  /** Single-queue runs. */
  ageChecks?: AgeCheck[]
}

export interface ReaperResults {
  queues: number
  cases: ReaperCase[]
}

interface QueueLine {
  queue: string
  error?: string
}

interface SummaryLine {
  oldestWaitQueue?: string
  oldestWaitAgeMs?: number
}

async function inBatches(n: number, fn: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < n; i += IN_FLIGHT) await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, n - i) }, (_, j) => fn(i + j)))
}

/** Adds one job to queue `name`; returns when the add was called and when it answered (Date.now). */
async function addOne(client: Redis, name: string, i: number): Promise<[number, number]> {
  const q = new Queue(name, { connection: client, prefix: EMQ_PREFIX })
  const before = Date.now()
  await q.add('job', payload(i))
  const after = Date.now()
  await q.close()
  return [before, after]
}

/** Runs `fn` with the reaper's EMF lines (stdout, one per run) kept off the bench's output. */
async function withoutEmf<T>(fn: () => Promise<T>): Promise<T> {
  const write = process.stdout.write
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) =>
    String(chunk).startsWith('{"_aws"') || (write as (...a: unknown[]) => boolean).call(process.stdout, chunk, ...rest)) as typeof write
  try {
    return await fn()
  } finally {
    process.stdout.write = write
  }
}

async function runCase(ctx: Ctx, kind: Kind, queues: number, counter: SentCommands): Promise<ReaperCase> {
  const { redis } = ctx
  await redis.meter.flushall()
  const client = counter.label(redis.connect(`emq-reaper-${kind}`), 'setup')
  const name = (i: number) => `rq-${kind}-${i}`
  const addedAt = new Map<string, [number, number]>()
  try {
    await inBatches(queues, async (i) => {
      if (kind === 'empty') await registerQueue(client, EMQ_PREFIX, name(i))
      else addedAt.set(name(i), await addOne(client, name(i), i))
    })
    let lines: QueueLine[] = []
    let summaryLine: SummaryLine = {}
    const log: Log = (level, message, fields) => {
      if (message === 'queue') lines.push(fields as QueueLine)
      else if (message === 'summary') summaryLine = fields as SummaryLine
      else if (level !== 'info') ctx.log(`reaper ${level}: ${message}`)
    }
    const reaper = createReaper(reaperConfig({ redisUrl: `redis://${redis.host}:${redis.port}`, metricsMode: 'emf' }, {}), { log })
    const run = (options?: { queues: string[] }) => withoutEmf(() => reaper.run(options))
    try {
      counter.reset()
      const c0 = performance.now()
      await run()
      const coldMs = performance.now() - c0
      const coldSent = counter.sent(UNLABELLED)
      const runs: ReaperRun[] = []
      let window: [number, number] = [0, 0]
      for (let r = 0; r < WARM_RUNS; r++) {
        lines = []
        counter.reset()
        await resetStats(redis.meter)
        const before = await commandStats(redis.meter)
        const startedAt = Date.now()
        const t0 = performance.now()
        const summary = await run()
        const ms = performance.now() - t0
        window = [startedAt, Date.now()]
        const stats = withoutMeter(subtract(await commandStats(redis.meter), before))
        const sent = counter.sent(UNLABELLED)
        if (Object.keys(summary.queues).length !== queues)
          throw new Error(`reaper ${kind}: swept ${Object.keys(summary.queues).length} of ${queues}`)
        const total = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0)
        const executed = Object.fromEntries(Object.entries(stats).map(([cmd, v]) => [cmd, v.calls]))
        runs.push({
          ms,
          sent,
          executed,
          sentPerQueue: (total(sent) - (sent.smembers ?? 0) - (sent.ping ?? 0)) / queues,
          scriptsPerQueue: sum(stats, SCRIPT_CMDS).calls / queues,
          executedPerQueue: (total(executed) - (executed.smembers ?? 0)) / queues,
          errors: lines.filter((l) => l.error !== undefined).length,
        })
      }
      const last = runs[runs.length - 1] as ReaperRun
      const result: ReaperCase = {
        kind,
        queues,
        coldMs,
        coldSent,
        runs,
        warmMs: spreadOf(runs, (r) => r.ms),
        sentPerQueue: last.sentPerQueue,
        scriptsPerQueue: last.scriptsPerQueue,
        executedPerQueue: last.executedPerQueue,
      }
      if (kind === 'waiting') {
        const { oldestWaitQueue: oldest, oldestWaitAgeMs: age = Number.NaN } = summaryLine
        const [before, after] = (oldest === undefined ? undefined : addedAt.get(oldest)) ?? [Number.NaN, Number.NaN]
        const firstReply = Math.min(...[...addedAt.values()].map(([, a]) => a))
        const inside = age >= window[0] - after - AGE_SLACK_MS && age <= window[1] - before + AGE_SLACK_MS
        const oldestOfAll = age >= window[0] - firstReply - AGE_SLACK_MS
        result.ages = { reported: oldest === undefined ? 0 : 1, outside: inside && oldestOfAll ? 0 : 1, minMs: age, maxMs: age }
        result.ageChecks = []
        for (let k = 0; k < AGE_CHECKS; k++) {
          const queue = `rq-age-${k}`
          const [before, after] = await addOne(client, queue, k)
          await sleep(100 + 200 * k)
          summaryLine = {}
          const t0 = Date.now()
          await run({ queues: [queue] })
          const t1 = Date.now()
          const ageMs = summaryLine.oldestWaitQueue === queue ? (summaryLine.oldestWaitAgeMs ?? Number.NaN) : Number.NaN
          const lowMs = t0 - after
          const highMs = t1 - before
          result.ageChecks.push({ ageMs, lowMs, highMs, offMs: ageMs - (lowMs + highMs) / 2 })
        }
      }
      ctx.log(
        `reaper ${kind}: ${queues} queues, cold ${fmt(coldMs)} ms, warm ${runs.map((r) => fmt(r.ms)).join(', ')} ms; ` +
          `${fmt(result.sentPerQueue, 3)} sent per queue`,
      )
      return result
    } finally {
      await reaper.close()
    }
  } finally {
    client.disconnect()
  }
}

export async function runReaper(ctx: Ctx): Promise<ReaperResults> {
  const queues = ctx.quick ? 1_000 : 10_000
  const counter = new SentCommands().install()
  counter.label(ctx.redis.meter, 'meter')
  try {
    const cases = [await runCase(ctx, 'waiting', queues, counter), await runCase(ctx, 'empty', queues, counter)]
    return { queues, cases }
  } finally {
    counter.uninstall()
    await ctx.redis.meter.flushall()
  }
}

const label = (c: ReaperCase) => (c.kind === 'waiting' ? 'one waiting job each' : 'empty (registered only)')

function ageFigures(c: ReaperCase): { ok: boolean; text: string } {
  const a = c.ages
  const checks = c.ageChecks ?? []
  if (!a) return { ok: true, text: '' }
  const within = checks.every((k) => k.ageMs >= k.lowMs - AGE_SLACK_MS && k.ageMs <= k.highMs + AGE_SLACK_MS)
  const worstOff = Math.max(0, ...checks.map((k) => Math.abs(k.offMs)))
  return {
    ok: a.reported === 1 && a.outside === 0 && within,
    text:
      `the summary of ${fmt(c.queues)} queues names the oldest wait, ${fmt(a.maxMs)} ms, ` +
      `${a.outside ? 'NOT ' : ''}within [run start - its add's reply, run end - its add's call] and past the first add's; one queue alone: ` +
      checks.map((k) => `${fmt(k.ageMs)} ms in [${fmt(k.lowMs)}, ${fmt(k.highMs)}]`).join(', ') +
      ` (at most ${fmt(worstOff, 1)} ms from the middle)`,
  }
}

export function reaperReport(r: ReaperResults): string {
  return (
    `Reaper pass: createReaper (metrics on: EMF, one sweep) over ${fmt(r.queues)} registered queues; wall clock of reaper.run(), ` +
    `${WARM_RUNS} warm runs after a cold one; commands from the client counter (sent) and INFO commandstats (executed, script-inner included)\n` +
    table(
      ['queues', 'cold ms', 'warm ms', 'sent per queue', 'script calls per queue', 'executed per queue', 'a warm run sent'],
      r.cases.map((c) => {
        const last = c.runs[c.runs.length - 1]
        return [
          label(c),
          fmt(c.coldMs),
          fs(c.warmMs),
          fmt(c.sentPerQueue, 3),
          fmt(c.scriptsPerQueue, 3),
          fmt(c.executedPerQueue, 1),
          commandList(last?.sent ?? {}),
        ]
      }),
    ) +
    '\n   per queue leaves out the registry read (SMEMBERS) and the ping, once per run; executed in a warm run (commandstats):' +
    r.cases.map((c) => `\n     ${label(c)}: ${commandList(c.runs[c.runs.length - 1]?.executed ?? {})}`).join('') +
    r.cases
      .filter((c) => c.ages)
      .map((c) => `\n   oldest-wait age: ${ageFigures(c).text}`)
      .join('')
  )
}

export function reaperTargets(r: ReaperResults): Target[] {
  return r.cases.flatMap((c) => {
    const errors = Math.max(0, ...c.runs.map((run) => run.errors))
    const out: Target[] = [
      {
        name: `reaper: one pass over ${fmt(c.queues)} queues, ${label(c)}, <= ${fmt(TARGET_RUN_MS)} ms`,
        pass: c.warmMs.median <= TARGET_RUN_MS && errors === 0,
        figures: `warm ${fs(c.warmMs)} ms over ${WARM_RUNS} runs; cold ${fmt(c.coldMs)} ms${errors ? `; ${errors} queues failed` : ''}`,
      },
      {
        name: `reaper: <= ${TARGET_SENT[c.kind]} command${TARGET_SENT[c.kind] > 1 ? 's' : ''} per queue, ${label(c)} (plus the registry read)`,
        pass: c.sentPerQueue <= TARGET_SENT[c.kind],
        figures:
          `${fmt(c.sentPerQueue, 3)} sent per queue (${commandList(c.runs[c.runs.length - 1]?.sent ?? {})}); commandstats: ` +
          `${fmt(c.scriptsPerQueue, 3)} script calls, ${fmt(c.executedPerQueue, 1)} commands executed per queue, script-inner included`,
      },
    ]
    if (c.ages) {
      const a = ageFigures(c)
      out.push({ name: "reaper: the oldest-wait age it reports is the job's waiting time", pass: a.ok, figures: a.text })
    }
    return out
  })
}
