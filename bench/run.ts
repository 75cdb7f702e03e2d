/**
 * `npm run bench` [-- --quick] [-- --only sweep,heartbeat,throughput,idle,queues,memory,retention,delayed,events,priority,ratelimit,
 *   addbulk,reaper,reaperHandler,featureOff,firstJob]
 *
 * Runs EchoMQ and BullMQ side by side on one fresh private redis-server (started here on a free port,
 * stopped at the end), prints one table per bench and the targets, and writes the results as JSON:
 * bench/results.json for a full run, bench/results-quick.json with --quick, bench/results-partial.json
 * with --only. Every EchoMQ/BullMQ ratio behind a target is the median of ROUNDS alternating runs, printed
 * with its range, except the sweep's (one run; its ratios are server time, not wall clock).
 */
import { readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { type AddBulkResults, addBulkReport, addBulkTargets, runAddBulk } from './addbulk.js'
import { type DelayedResults, delayedReport, delayedTargets, runDelayed } from './delayed.js'
import { type EventsResults, eventsReport, eventsTargets, runEvents } from './events.js'
import { type FeatureOffResults, featureOffReport, featureOffTargets, runFeatureOff } from './feature-off.js'
import { type FirstJobResults, firstJobReport, firstJobTargets, runFirstJob } from './first-job.js'
import type { Target } from './format.js'
import { type HeartbeatResults, heartbeatReport, heartbeatTargets, runHeartbeat } from './heartbeat.js'
import { type IdleResults, idleReport, idleTargets, runIdle } from './idle.js'
import { type MemoryResults, memoryReport, memoryTargets, runMemory } from './memory.js'
import { type PriorityResults, priorityReport, priorityTargets, runPriority } from './priority.js'
import { type QueuesResults, queuesReport, queuesTargets, runQueues } from './queues.js'
import { type RateLimitResults, rateLimitReport, rateLimitTargets, runRateLimit } from './ratelimit.js'
import { type ReaperResults, reaperReport, reaperTargets, runReaper } from './reaper.js'
import { type HandlerResults, reaperHandlerReport, reaperHandlerTargets, runReaperHandler } from './reaper-handler.js'
import { startRedis } from './redis.js'
import { type RetentionResults, retentionReport, retentionTargets, runRetention } from './retention.js'
import { runSweep, type SweepResults, sweepReport, sweepTargets } from './sweep.js'
import { runThroughput, type ThroughputResults, throughputReport, throughputTargets } from './throughput.js'
import type { Ctx } from './util.js'

interface Results {
  sweep: SweepResults
  heartbeat: HeartbeatResults
  throughput: ThroughputResults
  idle: IdleResults
  queues: QueuesResults
  memory: MemoryResults
  retention: RetentionResults
  delayed: DelayedResults
  events: EventsResults
  priority: PriorityResults
  ratelimit: RateLimitResults
  addbulk: AddBulkResults
  reaper: ReaperResults
  reaperHandler: HandlerResults
  featureOff: FeatureOffResults
  firstJob: FirstJobResults
}

interface Bench<R> {
  run(ctx: Ctx): Promise<R>
  report(result: R): string
  targets(result: R): Target[]
}

/** Every bench, in the order they run. */
const BENCHES: { [K in keyof Results]: Bench<Results[K]> } = {
  sweep: { run: runSweep, report: sweepReport, targets: sweepTargets },
  heartbeat: { run: runHeartbeat, report: heartbeatReport, targets: heartbeatTargets },
  throughput: { run: runThroughput, report: throughputReport, targets: throughputTargets },
  idle: { run: runIdle, report: idleReport, targets: idleTargets },
  queues: { run: runQueues, report: queuesReport, targets: queuesTargets },
  memory: { run: runMemory, report: memoryReport, targets: memoryTargets },
  retention: { run: runRetention, report: retentionReport, targets: retentionTargets },
  delayed: { run: runDelayed, report: delayedReport, targets: delayedTargets },
  events: { run: runEvents, report: eventsReport, targets: eventsTargets },
  priority: { run: runPriority, report: priorityReport, targets: priorityTargets },
  ratelimit: { run: runRateLimit, report: rateLimitReport, targets: rateLimitTargets },
  addbulk: { run: runAddBulk, report: addBulkReport, targets: addBulkTargets },
  reaper: { run: runReaper, report: reaperReport, targets: reaperTargets },
  reaperHandler: { run: runReaperHandler, report: reaperHandlerReport, targets: reaperHandlerTargets },
  featureOff: { run: runFeatureOff, report: featureOffReport, targets: featureOffTargets },
  firstJob: { run: runFirstJob, report: firstJobReport, targets: firstJobTargets },
}
type Name = keyof Results
const NAMES = Object.keys(BENCHES) as Name[]

function parseArgs(argv: string[]): { quick: boolean; only: Name[] } {
  let quick = false
  const only: Name[] = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === '--quick') quick = true
    else if (a === '--only' || a.startsWith('--only=')) {
      const value = a === '--only' ? argv[++i] : a.slice('--only='.length)
      for (const b of (value ?? '').split(',').filter(Boolean)) {
        if (!(NAMES as string[]).includes(b)) throw new Error(`unknown bench "${b}"; known: ${NAMES.join(', ')}`)
        only.push(b as Name)
      }
    } else throw new Error(`unknown argument "${a}"; usage: tsx bench/run.ts [--quick] [--only ${NAMES.join(',')}]`)
  }
  return { quick, only: only.length ? NAMES.filter((n) => only.includes(n)) : [...NAMES] }
}

/** One bench's section and targets; a bench that fails is reported and the others still run. */
async function runOne<K extends Name>(ctx: Ctx, name: K, results: Partial<Results>): Promise<{ text: string; targets: Target[] }> {
  const bench: Bench<Results[K]> = BENCHES[name]
  const started = Date.now()
  const result = await bench.run(ctx)
  results[name] = result
  ctx.log(`${name} done in ${((Date.now() - started) / 1000).toFixed(0)} s`)
  return { text: bench.report(result), targets: bench.targets(result) }
}

function version(pkg: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(process.cwd(), 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version
  } catch {
    return '?'
  }
}

async function main(): Promise<void> {
  const { quick, only } = parseArgs(process.argv.slice(2))
  const started = Date.now()
  const redis = await startRedis()
  const stop = () => {
    void redis.stop().finally(() => process.exit(130))
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  const ctx: Ctx = { redis, quick, log: (m) => console.error(`[bench ${((Date.now() - started) / 1000).toFixed(1)}s] ${m}`) }
  const results: Partial<Results> = {}
  const errors: Partial<Record<Name, string>> = {}
  const sections: string[] = []
  const targets: Target[] = []
  try {
    ctx.log(`redis-server ${redis.version} on ${redis.host}:${redis.port}; running ${only.join(', ')}${quick ? ' (quick)' : ''}`)
    for (const name of only) {
      try {
        const { text, targets: t } = await runOne(ctx, name, results)
        sections.push(`\n${sections.length + 1}. ${text}`)
        targets.push(...t.map((g) => (quick ? { ...g, name: `${g.name} [quick sizes]` } : g)))
      } catch (err) {
        errors[name] = err instanceof Error ? (err.stack ?? err.message) : String(err)
        ctx.log(`${name} FAILED: ${errors[name]}`)
      }
    }
  } finally {
    await redis.stop()
  }
  const seconds = (Date.now() - started) / 1000
  const env = {
    date: new Date(started).toISOString(),
    mode: quick ? 'quick' : 'full',
    benches: only,
    node: process.version,
    redis: redis.version,
    cpus: os.cpus().length,
    bullmq: version('bullmq'),
    ioredis: version('ioredis'),
    totalSeconds: Math.round(seconds),
  }
  const head =
    `EchoMQ vs BullMQ ${env.bullmq}: a fresh redis-server ${env.redis}, node ${env.node}, ${env.cpus} CPUs, ${env.mode} sizes; ` +
    'ratios are EchoMQ/BullMQ, median (min-max) of alternating runs where marked'
  const file = path.join(
    path.dirname(fileURLToPath(import.meta.url)),
    quick ? 'results-quick.json' : only.length < NAMES.length ? 'results-partial.json' : 'results.json',
  )
  writeFileSync(file, `${JSON.stringify({ env, targets, errors, results }, null, 2)}\n`)
  const status = (g: Target) => (g.pass === undefined ? 'INFO' : g.pass ? 'PASS' : 'MISS')
  console.log([head, ...sections].join('\n'))
  if (targets.length) console.log(`\nTargets\n${targets.map((g) => `${status(g)}  ${g.name}: ${g.figures}`).join('\n')}`)
  if (Object.keys(errors).length) process.exitCode = 1
  for (const [name, err] of Object.entries(errors)) console.log(`\nFAILED ${name}: ${err.split('\n')[0]}`)
  console.log(`\nresults: ${path.relative(process.cwd(), file)}; total run time ${seconds.toFixed(0)} s`)
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err: unknown) => {
    console.error(err)
    process.exit(1)
  },
)
