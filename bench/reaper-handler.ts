/**
 * The reaper pass as the Lambda runs it: lib/reaper/handler.ts's createHandler (the Powertools Logger, the
 * container's reaper, EMF metrics) over Q registered queues, each holding one job, in two cases: the job
 * waiting, and the job in flight under a live lease (taken as a worker takes it, a lease of 10 minutes).
 * One cold invocation (a new container: the reaper knows no queue yet), then WARM_RUNS timed ones.
 *
 * Per invocation: wall clock of the handler's call; what it wrote to stdout and stderr (the Logger's lines
 * and the EMF document), each chunk written on to a file as Lambda's runtime would write it on, counted in
 * bytes and lines; the commands the reaper's connection sent (counted on the client, bench/count.ts; per
 * queue without those an invocation sends once whatever the queues: the registry read, and on a cold start
 * the connection's, the eviction-policy check and discovery's scan); Redis's CPU over the call (INFO cpu)
 * and this process's (process.cpuUsage), the two sides of the time. Redis has the scripts cached before the
 * cold invocation (another container's invocation over one queue loaded them), as a running deployment's has.
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { Redis } from 'ioredis'
import { addJobs, holdJobs } from '../cli/support/crashed-state.js'
import { createHandler } from '../lib/reaper/handler.js'
import { EMQ_PREFIX } from './build.js'
import { SentCommands, UNLABELLED } from './count.js'
import { commandList, fmt, fs, type Target, table } from './format.js'
import { redisCpuUs } from './meter.js'
import { type Ctx, type Spread, spreadOf } from './util.js'

const WARM_RUNS = 5
const TARGET_MS = 1_000
const TARGET_PER_QUEUE = 2
/** A pass where nothing happened: the summary line and the EMF document, whatever the number of queues. */
const TARGET_LINES = 2
const TARGET_BYTES = 4_096
/** Queues set up at once. */
const IN_FLIGHT = 500
const LEASE_MS = 600_000
/** Commands an invocation sends once, whatever the number of queues (left out of the per-queue figure). */
const PER_INVOCATION = ['smembers', 'ping', 'client', 'hello', 'config', 'pttl', 'set', 'scan']

type Kind = 'waiting' | 'running'

interface Invocation {
  ms: number
  sent: Record<string, number>
  perQueue: number
  logBytes: number
  logLines: number
  redisCpuMs: number
  nodeCpuMs: number
}

export interface HandlerCase {
  kind: Kind
  queues: number
  cold: Invocation
  runs: Invocation[]
  ms: Spread
  perQueue: Spread
  logBytes: Spread
  logLines: Spread
  redisCpuMs: Spread
  nodeCpuMs: Spread
}

export interface HandlerResults {
  queues: number
  cases: HandlerCase[]
}

/** Counts what the process writes to stdout and stderr while `fn` runs, writing it on to `fd`. */
async function captured<T>(fd: number, fn: () => Promise<T>): Promise<{ value: T; bytes: number; lines: number }> {
  let bytes = 0
  let lines = 0
  const streams = [process.stdout, process.stderr] as const
  const writes = streams.map((s) => s.write)
  for (const s of streams) {
    s.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8')
      bytes += Buffer.byteLength(text)
      for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lines++
      writeSync(fd, text)
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined
      done?.()
      return true
    }) as typeof s.write
  }
  try {
    return { value: await fn(), bytes, lines }
  } finally {
    streams.forEach((s, i) => {
      s.write = writes[i] as typeof s.write
    })
  }
}

async function setUp(client: Redis, kind: Kind, queues: number): Promise<void> {
  for (let i = 0; i < queues; i += IN_FLIGHT) {
    await Promise.all(
      Array.from({ length: Math.min(IN_FLIGHT, queues - i) }, async (_, j) => {
        const queue = `rh-${kind}-${i + j}`
        await addJobs(client, queue, [`${queue}-job`], { prefix: EMQ_PREFIX })
        if (kind === 'running') await holdJobs(client, queue, 1, { prefix: EMQ_PREFIX, leaseMs: LEASE_MS, workerName: 'bench' })
      }),
    )
  }
}

async function runCase(ctx: Ctx, kind: Kind, queues: number, counter: SentCommands, fd: number): Promise<HandlerCase> {
  const { redis } = ctx
  await redis.meter.flushall()
  const client = counter.label(redis.connect(`emq-handler-${kind}`), 'setup')
  try {
    await setUp(client, kind, queues)
  } finally {
    client.disconnect()
  }
  const env = { REDIS_URL: `redis://${redis.host}:${redis.port}`, PREFIX: EMQ_PREFIX, METRICS_MODE: 'emf' }
  const handler = createHandler(env)
  const context = {
    awsRequestId: 'bench',
    functionName: 'echomq-reaper-bench-sweep',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:echomq-reaper-bench-sweep',
    memoryLimitInMB: '1024',
    getRemainingTimeInMillis: () => 60_000,
  }
  const event = { source: 'aws.events', 'detail-type': 'Scheduled Event' }
  const invoke = async (): Promise<Invocation> => {
    counter.reset()
    const redisCpu = await redisCpuUs(redis.meter)
    const nodeCpu = process.cpuUsage()
    const t0 = performance.now()
    const { value: summary, bytes, lines } = await captured(fd, () => handler(event, context))
    const ms = performance.now() - t0
    const node = process.cpuUsage(nodeCpu)
    const redisCpuMs = ((await redisCpuUs(redis.meter)) - redisCpu) / 1000
    if (Object.keys(summary.queues).length !== queues)
      throw new Error(`handler ${kind}: swept ${Object.keys(summary.queues).length} of ${queues}`)
    const sent = counter.sent(UNLABELLED)
    const total = Object.values(sent).reduce((a, b) => a + b, 0)
    return {
      ms,
      sent,
      perQueue: (total - PER_INVOCATION.reduce((n, c) => n + (sent[c] ?? 0), 0)) / queues,
      logBytes: bytes,
      logLines: lines,
      redisCpuMs,
      nodeCpuMs: (node.user + node.system) / 1000,
    }
  }
  try {
    const other = createHandler(env)
    await captured(fd, () => other({ queues: [`rh-${kind}-0`] }, context)).finally(() => other.close())
    const cold = await invoke()
    const runs: Invocation[] = []
    for (let r = 0; r < WARM_RUNS; r++) runs.push(await invoke())
    const of = (f: (i: Invocation) => number) => spreadOf(runs, f)
    ctx.log(`reaper handler ${kind}: ${queues} queues, cold ${fmt(cold.ms)} ms, warm ${runs.map((r) => fmt(r.ms)).join(', ')} ms`)
    return {
      kind,
      queues,
      cold,
      runs,
      ms: of((i) => i.ms),
      perQueue: of((i) => i.perQueue),
      logBytes: of((i) => i.logBytes),
      logLines: of((i) => i.logLines),
      redisCpuMs: of((i) => i.redisCpuMs),
      nodeCpuMs: of((i) => i.nodeCpuMs),
    }
  } finally {
    await handler.close()
  }
}

export async function runReaperHandler(ctx: Ctx): Promise<HandlerResults> {
  const queues = ctx.quick ? 1_000 : 10_000
  const counter = new SentCommands().install()
  counter.label(ctx.redis.meter, 'meter')
  const dir = mkdtempSync(path.join(tmpdir(), 'echomq-handler-log-'))
  const fd = openSync(path.join(dir, 'stdout.log'), 'w')
  try {
    const cases = [await runCase(ctx, 'waiting', queues, counter, fd), await runCase(ctx, 'running', queues, counter, fd)]
    return { queues, cases }
  } finally {
    counter.uninstall()
    closeSync(fd)
    rmSync(dir, { recursive: true, force: true })
    await ctx.redis.meter.flushall()
  }
}

const label = (c: HandlerCase) => (c.kind === 'waiting' ? 'one waiting job each' : 'one job in flight each (live lease)')

export function reaperHandlerReport(r: HandlerResults): string {
  return (
    `Reaper pass through the Lambda handler (lib/reaper/handler.ts: Powertools Logger, EMF metrics, one sweep), logs included, over ` +
    `${fmt(r.queues)} registered queues; ${WARM_RUNS} warm invocations after a cold one (a new container); log = what stdout and stderr ` +
    'received, written on to a file; commands counted on the client\n' +
    table(
      ['queues', 'cold ms', 'warm ms', 'per queue (cold)', 'per queue (warm)', 'log lines', 'log bytes', 'redis CPU ms', 'node CPU ms'],
      r.cases.map((c) => [
        label(c),
        fmt(c.cold.ms),
        fs(c.ms),
        fmt(c.cold.perQueue, 2),
        fs(c.perQueue, 2),
        fs(c.logLines),
        fs(c.logBytes),
        fs(c.redisCpuMs),
        fs(c.nodeCpuMs),
      ]),
    ) +
    r.cases
      .map((c) => `\n   ${label(c)}: sent cold ${commandList(c.cold.sent)}; warm ${commandList(c.runs[c.runs.length - 1]?.sent ?? {})}`)
      .join('')
  )
}

export function reaperHandlerTargets(r: HandlerResults): Target[] {
  return r.cases.flatMap((c) => [
    {
      name: `reaper handler: one pass over ${fmt(c.queues)} queues, ${label(c)}, logs included, <= ${fmt(TARGET_MS)} ms`,
      pass: c.ms.median <= TARGET_MS,
      figures: `warm ${fs(c.ms)} ms over ${WARM_RUNS} invocations; cold ${fmt(c.cold.ms)} ms; CPU per warm pass: redis ${fs(c.redisCpuMs)} ms, node ${fs(c.nodeCpuMs)} ms`,
    },
    {
      name: `reaper handler: <= ${TARGET_PER_QUEUE} commands per queue, ${label(c)} (plus the registry read)`,
      pass: Math.max(c.cold.perQueue, c.perQueue.max) <= TARGET_PER_QUEUE,
      figures: `cold ${fmt(c.cold.perQueue, 2)}, warm ${fs(c.perQueue, 2)} sent per queue`,
    },
    {
      name: `reaper handler: log per pass where nothing happened <= ${TARGET_LINES} lines and ${fmt(TARGET_BYTES)} bytes, whatever the queues (${label(c)})`,
      pass: c.logLines.max <= TARGET_LINES && c.logBytes.max <= TARGET_BYTES && c.cold.logLines <= TARGET_LINES,
      figures: `warm ${fs(c.logLines)} lines, ${fs(c.logBytes)} bytes; cold ${c.cold.logLines} lines, ${fmt(c.cold.logBytes)} bytes (${fmt(c.queues)} queues)`,
    },
  ])
}
