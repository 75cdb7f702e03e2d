/**
 * `npm run bench:cost [-- --jobs N] [-- --rounds R] [-- --only plain,payload,...]`
 *
 * What a managed Redis bills per job, EchoMQ against BullMQ 6.7: each side on its own fresh redis-server
 * per run (so neither warms the other's server), N jobs added with addBulk and run by one Worker at
 * concurrency 50, each library with its defaults. Read from the server (INFO cpu and stats, before and
 * after): Redis CPU (used_cpu_user + used_cpu_sys), bytes in and out; and from the client: commands sent
 * (every ioredis sendCommand, pipelines included; a script call is one command, as Upstash counts it).
 * Server-side command counts would not do: Redis counts the commands a script runs as processed too.
 *
 * Ratios are the median of ROUNDS alternating runs (EchoMQ, BullMQ, EchoMQ, ...) with their range.
 * bench/cost-prices.ts turns the figures into US dollars per million jobs.
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import os from 'node:os'
import { Redis } from 'ioredis'
import { startLocalRedis } from '../cli/support/local-redis.js'
import { functionPath, prices, SIMPLE_COMMAND_US, sqsLambdaPath } from './cost-prices.js'
import { type FunctionRun, runBull, runEmq } from './cost-runners.js'
import { COST_SCENARIOS, DEFAULT_SCENARIOS, type Scenario } from './cost-scenarios.js'
import { fmt, table, xs } from './format.js'
import { median, ratio, type Spread, spread } from './util.js'

export interface CostRun {
  redisCpuUs: number
  bytesIn: number
  bytesOut: number
  commands: number
  /** The function scenario's EchoMQ side: invocations and the handler's milliseconds, per job. */
  invocations?: number
  functionMs?: number
}

interface ServerReading {
  cpuUs: number
  bytesIn: number
  bytesOut: number
}

/** Every command any ioredis client of this process sends (EchoMQ and BullMQ share the one ioredis). */
let commandsSent = 0
const proto = Redis.prototype as unknown as { sendCommand: (...args: unknown[]) => unknown }
const original = proto.sendCommand
proto.sendCommand = function (this: unknown, ...args: unknown[]) {
  commandsSent++
  return original.apply(this, args)
}

async function reading(meter: Redis): Promise<ServerReading> {
  const info = `${await meter.info('cpu')}\n${await meter.info('stats')}`
  const num = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN)
  return {
    cpuUs: (num('used_cpu_user') + num('used_cpu_sys')) * 1e6,
    bytesIn: num('total_net_input_bytes'),
    bytesOut: num('total_net_output_bytes'),
  }
}

/** Runs `n` jobs of the scenario through one library on a fresh server; returns per-job figures. */
async function runOnce(lib: 'emq' | 'bull', scenario: Scenario, n: number): Promise<CostRun> {
  const server = await startLocalRedis(['--maxmemory-policy', 'noeviction'])
  const meter = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true })
  await meter.connect()
  const connection = { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null }
  try {
    const before = await reading(meter)
    const sentBefore = commandsSent
    const fn: FunctionRun | undefined = await (lib === 'emq' ? runEmq(connection, scenario, n) : runBull(connection, scenario, n))
    const sent = commandsSent - sentBefore
    const after = await reading(meter)
    // Per job: for a flow every job of it (parent and children), else per add (a deduplicated add included).
    const jobs = scenario.flows ? (scenario.completions?.(n) ?? n) : n
    // The meter's own two INFO calls: their replies are a few kB, under 1 byte per job at 10,000 jobs.
    return {
      redisCpuUs: (after.cpuUs - before.cpuUs) / jobs,
      bytesIn: (after.bytesIn - before.bytesIn) / jobs,
      bytesOut: (after.bytesOut - before.bytesOut) / jobs,
      commands: (sent - 2) / jobs,
      ...(fn ? { invocations: fn.invocations / jobs, functionMs: fn.functionMs / jobs } : {}),
    }
  } finally {
    meter.disconnect()
    await server.stop()
  }
}

/**
 * The unit of the ElastiCache model (bench/cost-prices.ts): Redis CPU (µs) of one simple command, GET or SET
 * of 3 bytes, on a fresh server of this machine, as redis-benchmark sends them (50 clients, no pipelining).
 * A job's CPU is priced in such units, so the dollars do not depend on the machine's speed. Undefined
 * without redis-benchmark.
 */
export async function simpleCommandUs(): Promise<number | undefined> {
  const server = await startLocalRedis(['--maxmemory-policy', 'noeviction'])
  const meter = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true })
  await meter.connect()
  const n = 100_000
  try {
    const before = await reading(meter)
    execFileSync('redis-benchmark', ['-h', '127.0.0.1', '-p', String(server.port), '-t', 'set,get', '-n', String(n), '-P', '1', '-q'], {
      stdio: 'ignore',
      timeout: 120_000,
    })
    const after = await reading(meter)
    return (after.cpuUs - before.cpuUs) / (2 * n)
  } catch {
    return undefined
  } finally {
    meter.disconnect()
    await server.stop()
  }
}

export interface CostRow {
  scenario: string
  emq: CostRun[]
  bull: CostRun[]
  ratios: Record<Figure, Spread>
}

type Figure = 'redisCpuUs' | 'bytesIn' | 'bytesOut' | 'commands'
const FIGURES: Figure[] = ['redisCpuUs', 'bytesIn', 'bytesOut', 'commands']

export async function runCost(opts: { jobs: number; rounds: number; only?: string[] }, log = console.log): Promise<CostRow[]> {
  const rows: CostRow[] = []
  const names = opts.only ?? DEFAULT_SCENARIOS
  for (const name of names) if (!COST_SCENARIOS.some((s) => s.name === name)) throw new Error(`unknown scenario "${name}"`)
  for (const scenario of COST_SCENARIOS) {
    if (!names.includes(scenario.name)) continue
    const emq: CostRun[] = []
    const bull: CostRun[] = []
    // One unmeasured run each, so module loading and JIT fall outside the figures.
    await runOnce('emq', scenario, 500)
    await runOnce('bull', scenario, 500)
    for (let round = 0; round < opts.rounds; round++) {
      emq.push(await runOnce('emq', scenario, opts.jobs))
      bull.push(await runOnce('bull', scenario, opts.jobs))
      log(
        `  ${scenario.name} round ${round + 1}: emq ${fmt(emq.at(-1)?.redisCpuUs ?? 0, 1)} µs, bull ${fmt(bull.at(-1)?.redisCpuUs ?? 0, 1)} µs`,
      )
    }
    const ratios = Object.fromEntries(
      FIGURES.map((f) => [f, spread(emq.map((run, i) => ratio(run[f], (bull[i] as CostRun)[f])))]),
    ) as Record<Figure, Spread>
    rows.push({ scenario: scenario.name, emq, bull, ratios })
  }
  return rows
}

const med = (runs: CostRun[], f: keyof CostRun) => median(runs.map((r) => r[f] ?? Number.NaN))

export function costReport(rows: CostRow[], simpleUs = SIMPLE_COMMAND_US): string {
  const figures = table(
    [
      'scenario',
      'Redis CPU µs/job emq / bull',
      'ratio',
      'bytes in+out/job emq / bull',
      'ratio in / out',
      'commands/job emq / bull',
      'ratio',
    ],
    rows.map((r) => [
      r.scenario,
      `${fmt(med(r.emq, 'redisCpuUs'), 1)} / ${fmt(med(r.bull, 'redisCpuUs'), 1)}`,
      xs(r.ratios.redisCpuUs),
      `${fmt(med(r.emq, 'bytesIn') + med(r.emq, 'bytesOut'))} / ${fmt(med(r.bull, 'bytesIn') + med(r.bull, 'bytesOut'))}`,
      `${xs(r.ratios.bytesIn)} / ${xs(r.ratios.bytesOut)}`,
      `${fmt(med(r.emq, 'commands'), 2)} / ${fmt(med(r.bull, 'commands'), 2)}`,
      xs(r.ratios.commands),
    ]),
  )
  const dollars = table(
    ['scenario', 'ElastiCache Serverless $/M jobs emq / bull', 'Upstash $/M jobs emq / bull'],
    rows.map((r) => {
      const e = prices(
        { redisCpuUs: med(r.emq, 'redisCpuUs'), bytes: med(r.emq, 'bytesIn') + med(r.emq, 'bytesOut'), commands: med(r.emq, 'commands') },
        simpleUs,
      )
      const b = prices(
        {
          redisCpuUs: med(r.bull, 'redisCpuUs'),
          bytes: med(r.bull, 'bytesIn') + med(r.bull, 'bytesOut'),
          commands: med(r.bull, 'commands'),
        },
        simpleUs,
      )
      return [r.scenario, `${e.elasticache.toFixed(3)} / ${b.elasticache.toFixed(3)}`, `${e.upstash.toFixed(2)} / ${b.upstash.toFixed(2)}`]
    }),
  )
  const unit = `ElastiCache's ECPU priced as ${fmt(simpleUs, 2)} µs of Redis CPU, a simple command's in this run (bench/cost-prices.ts)`
  return [figures, `${dollars}\n${unit}`, serverlessPath(rows), targets(rows)].filter(Boolean).join('\n\n')
}

/** The function row turned into the serverless path's bill against SQS + Lambda, per million jobs. */
function serverlessPath(rows: CostRow[]): string {
  const row = rows.find((r) => r.emq.some((run) => run.invocations !== undefined))
  if (!row) return ''
  const job = {
    redisCpuUs: med(row.emq, 'redisCpuUs'),
    bytes: med(row.emq, 'bytesIn') + med(row.emq, 'bytesOut'),
    commands: med(row.emq, 'commands'),
    invocations: med(row.emq, 'invocations'),
    functionMs: med(row.emq, 'functionMs'),
  }
  const e = functionPath(job)
  const s = sqsLambdaPath(job.functionMs)
  const usd = (n: number) => `$${n.toFixed(3)}`
  return (
    `per million no-op jobs (${row.scenario} row): Lambda requests, GB-s (512 MB), Lambda $, queue $\n` +
    table(
      ['path', 'requests', 'GB-s', 'Lambda', 'queue', 'total'],
      [
        ['EchoMQ worker functions (Upstash)', fmt(e.requests), fmt(e.gbSeconds, 1), usd(e.lambda), usd(e.queue), usd(e.lambda + e.queue)],
        ['SQS + Lambda (batch 10)', fmt(s.requests), fmt(s.gbSeconds, 1), usd(s.lambda), usd(s.queue), usd(s.lambda + s.queue)],
      ],
    ) +
    '\n(the reaper adds ~43,800 invocations a month whatever the jobs; SQS + Lambda: same GB-s assumed, not measured)'
  )
}

/** Target 1: each figure at most TARGET x BullMQ's, by the median of the run-by-run ratios. */
const TARGET = 0.35

function targets(rows: CostRow[]): string {
  const lines: string[] = []
  for (const r of rows)
    for (const f of FIGURES) {
      const s = r.ratios[f]
      lines.push(`${s.median <= TARGET ? 'PASS' : 'MISS'}  ${r.scenario} ${f} <= ${TARGET}x: ${xs(s)}`)
    }
  return `Targets (EchoMQ / BullMQ, median of ${rows[0]?.emq.length ?? 0} alternating rounds)\n${lines.join('\n')}`
}

function parse(argv: string[]): { jobs: number; rounds: number; only?: string[] } {
  const value = (flag: string) => {
    const i = argv.indexOf(flag)
    return i >= 0 ? argv[i + 1] : undefined
  }
  const only = value('--only')?.split(',')
  return { jobs: Number(value('--jobs') ?? 10_000), rounds: Number(value('--rounds') ?? 3), ...(only ? { only } : {}) }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const opts = parse(process.argv.slice(2))
  const started = new Date().toISOString()
  console.log(`cost per job: ${opts.jobs} jobs per run, ${opts.rounds} alternating rounds, concurrency 50 (the function: 10)`)
  console.log(
    `load average at the start: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')}`,
  )
  const rows = await runCost(opts)
  const simpleUs = await simpleCommandUs()
  if (simpleUs === undefined) console.log(`no redis-benchmark: a simple command taken as ${SIMPLE_COMMAND_US} µs`)
  console.log(costReport(rows, simpleUs))
  console.log(
    `load average at the end: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')}`,
  )
  // Every run's figures, for the docs' tables (bench/cost-results.json; a subset: cost-results-partial.json).
  const file = new URL(opts.only ? 'cost-results-partial.json' : 'cost-results.json', import.meta.url)
  writeFileSync(
    file,
    `${JSON.stringify({ started, argv: process.argv.slice(2), loadavg: os.loadavg(), simpleCommandUs: simpleUs, rows }, null, 2)}\n`,
  )
}
