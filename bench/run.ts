/**
 * `npm run bench` [-- --quick] [-- --only sweep,heartbeat,throughput,idle]
 *
 * Runs EchoMQ and BullMQ side by side on one fresh private redis-server (started here, stopped at the
 * end), prints a table with EchoMQ/BullMQ ratios and the targets, and writes the results as JSON:
 * bench/results.json for a full run, bench/results-quick.json with --quick, bench/results-partial.json
 * with --only. Server-side times are read from Redis (INFO commandstats, INFO cpu, SLOWLOG).
 */
import { readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { type HeartbeatRow, runHeartbeat } from './heartbeat.js'
import { type IdleResult, runIdle } from './idle.js'
import { startRedis } from './redis.js'
import { runSweep, type SweepResults } from './sweep.js'
import { runThroughput, type ThroughputRow } from './throughput.js'
import { type Ctx, ratio } from './util.js'

const BENCHES = ['sweep', 'heartbeat', 'throughput', 'idle'] as const
type Bench = (typeof BENCHES)[number]

interface Results {
  sweep?: SweepResults
  heartbeat?: HeartbeatRow[]
  throughput?: ThroughputRow[]
  idle?: IdleResult
}

interface Target {
  name: string
  pass: boolean
  figures: string
}

function parseArgs(argv: string[]): { quick: boolean; only: Bench[] } {
  let quick = false
  const only: Bench[] = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === '--quick') quick = true
    else if (a === '--only' || a.startsWith('--only=')) {
      const value = a === '--only' ? argv[++i] : a.slice('--only='.length)
      for (const b of (value ?? '').split(',').filter(Boolean)) {
        if (!(BENCHES as readonly string[]).includes(b)) throw new Error(`unknown bench "${b}"; known: ${BENCHES.join(', ')}`)
        only.push(b as Bench)
      }
    } else throw new Error(`unknown argument "${a}"; usage: tsx bench/run.ts [--quick] [--only ${BENCHES.join(',')}]`)
  }
  return { quick, only: only.length ? only : [...BENCHES] }
}

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : String(n)
const x = (r: number) => (Number.isFinite(r) ? `${r < 0.1 ? r.toFixed(4) : r.toFixed(2)}x` : 'inf')

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ')
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

function targets(r: Results, quick: boolean): Target[] {
  const out: Target[] = []
  const note = quick ? ' [quick sizes]' : ''
  if (r.sweep?.rows.length) {
    const rows = r.sweep.rows
    const maxN = Math.max(...rows.map((s) => s.n))
    const minN = Math.min(...rows.map((s) => s.n))
    const maxK = Math.max(...rows.map((s) => s.k))
    const big = rows.find((s) => s.n === maxN && s.k === maxK)
    if (big) {
      const rr = ratio(big.emq.usec, big.bull.usec)
      out.push({
        name: `sweep N=${maxN} k=${maxK}: server time <= 1/20 of BullMQ${note}`,
        pass: rr <= 0.05,
        figures: `${fmt(big.emq.usec)} vs ${fmt(big.bull.usec)} µs = ${x(rr)} (limit 0.05x)`,
      })
      out.push({
        name: `sweep N=${maxN} k=${maxK}: no single call > 10 ms${note}`,
        pass: big.emq.maxCallUs <= 10_000,
        figures: `longest EchoMQ call ${fmt(big.emq.maxCallUs)} µs (BullMQ ${fmt(big.bull.maxCallUs)} µs)`,
      })
    }
    const flatBig = r.sweep.flat.find((f) => f.n === maxN)?.medianUs
    const flatSmall = r.sweep.flat.find((f) => f.n === minN)?.medianUs
    if (flatBig !== undefined && flatSmall !== undefined && maxN > minN) {
      const g = ratio(flatBig, flatSmall)
      out.push({
        name: `sweep k=0: cost does not grow with N (N=${maxN} <= 1.5x N=${minN})${note}`,
        pass: g <= 1.5,
        figures: `median sweep ${fmt(flatBig)} µs at N=${maxN} vs ${fmt(flatSmall)} µs at N=${minN} = ${x(g)}`,
      })
    }
  }
  for (const h of r.heartbeat ?? []) {
    const rr = ratio(h.emq.usecPerLease, h.bull.usecPerLease)
    out.push({
      name: `heartbeat L=${h.leases}: cost per lease and round trips <= BullMQ${note}`,
      pass: rr <= 1 && h.emq.roundTrips <= h.bull.roundTrips,
      figures: `${fmt(h.emq.usecPerLease, 2)} vs ${fmt(h.bull.usecPerLease, 2)} µs/lease = ${x(rr)}; round trips ${h.emq.roundTrips} vs ${h.bull.roundTrips}`,
    })
  }
  if (r.idle) {
    const rr = ratio(r.idle.emq.perMinute, r.idle.bull.perMinute)
    out.push({
      name: `idle: commands per minute <= BullMQ${note}`,
      pass: rr <= 1,
      figures: `${fmt(r.idle.emq.perMinute, 1)} vs ${fmt(r.idle.bull.perMinute, 1)} /min = ${x(rr)} (${r.idle.windowS} s window scaled)`,
    })
  }
  for (const t of r.throughput ?? []) {
    const rr = ratio(t.emq.jobsPerSec, t.bull.jobsPerSec)
    out.push({
      name: `throughput c=${t.concurrency}: jobs/s >= BullMQ${note}`,
      pass: rr >= 1,
      figures: `${fmt(t.emq.jobsPerSec)} vs ${fmt(t.bull.jobsPerSec)} jobs/s = ${x(rr)}`,
    })
  }
  return out
}

function report(r: Results, t: Target[], head: string): string {
  const parts: string[] = [head]
  if (r.sweep) {
    parts.push(
      '\n1. Sweep: server time per pass, µs (INFO commandstats: top-level EVALSHA/ZRANGE); pass 1 marks, pass 2 recovers\n' +
        table(
          [
            'N',
            'k',
            'EMQ mark',
            'EMQ recover',
            'EMQ total',
            'EMQ max call',
            'EMQ calls',
            'Bull mark',
            'Bull recover',
            'Bull total',
            'Bull max call',
            'ratio total',
            'ratio max call',
          ],
          r.sweep.rows.map((s) => [
            fmt(s.n),
            fmt(s.k),
            fmt(s.emq.mark.usec),
            fmt(s.emq.recover.usec),
            fmt(s.emq.usec),
            fmt(s.emq.maxCallUs),
            `${s.emq.mark.calls}+${s.emq.recover.calls}`,
            fmt(s.bull.mark.usec),
            fmt(s.bull.recover.usec),
            fmt(s.bull.usec),
            fmt(s.bull.maxCallUs),
            x(ratio(s.emq.usec, s.bull.usec)),
            x(ratio(s.emq.maxCallUs, s.bull.maxCallUs)),
          ]),
        ) +
        '\n   BullMQ: healthy locks renewed between its two calls (unmeasured), as its workers do within a stalledInterval.',
    )
    const flat = r.sweep.flat
    if (flat.length) {
      parts.push(
        `   EchoMQ sweep with nothing stalled (one queue per N, swept in turn ${flat[0]?.rounds} times): ` +
          flat.map((f) => `N=${fmt(f.n)} median ${fmt(f.medianUs)} µs (min ${fmt(f.minUs)})`).join(', '),
      )
    }
  }
  if (r.heartbeat) {
    parts.push(
      '\n2. Heartbeat: renewing L leases once (median of 5 ticks; server µs from INFO commandstats; round trips counted on the client)\n' +
        table(
          [
            'leases',
            'EMQ µs/lease',
            'EMQ µs/tick',
            'EMQ calls',
            'EMQ RT',
            'Bull µs/lease',
            'Bull µs/tick',
            'Bull calls',
            'Bull RT',
            'ratio µs/lease',
          ],
          r.heartbeat.map((h) => [
            fmt(h.leases),
            fmt(h.emq.usecPerLease, 2),
            fmt(h.emq.usec),
            fmt(h.emq.calls),
            fmt(h.emq.roundTrips),
            fmt(h.bull.usecPerLease, 2),
            fmt(h.bull.usec),
            fmt(h.bull.calls),
            fmt(h.bull.roundTrips),
            x(ratio(h.emq.usecPerLease, h.bull.usecPerLease)),
          ]),
        ),
    )
  }
  if (r.throughput) {
    parts.push(
      '\n3. Throughput: no-op jobs, pre-added, one worker in this process (jobs/s on the client clock; Redis CPU from INFO cpu)\n' +
        table(
          [
            'concurrency',
            'jobs',
            'EMQ jobs/s',
            'EMQ Redis CPU µs/job',
            'EMQ scripts/job',
            'Bull jobs/s',
            'Bull Redis CPU µs/job',
            'Bull scripts/job',
            'ratio jobs/s',
          ],
          r.throughput.map((t) => [
            fmt(t.concurrency),
            fmt(t.jobs),
            fmt(t.emq.jobsPerSec),
            fmt(t.emq.redisCpuUsPerJob, 1),
            fmt(t.emq.scriptCallsPerJob, 2),
            fmt(t.bull.jobsPerSec),
            fmt(t.bull.redisCpuUsPerJob, 1),
            fmt(t.bull.scriptCallsPerJob, 2),
            x(ratio(t.emq.jobsPerSec, t.bull.jobsPerSec)),
          ]),
        ),
    )
  }
  if (r.idle) {
    const i = r.idle
    const cmds = (c: Record<string, number>) =>
      Object.entries(c)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')
    parts.push(
      `\n4. Idle: Redis commands per minute, measured for ${i.windowS} s and scaled to 1 minute (EchoMQ: worker + sweep every 10 s; BullMQ: worker with its stalled checker)\n` +
        table(
          ['', 'EchoMQ', 'BullMQ', 'ratio'],
          [
            [
              'commands/min sent by clients',
              fmt(i.emq.perMinute, 1),
              fmt(i.bull.perMinute, 1),
              x(ratio(i.emq.perMinute, i.bull.perMinute)),
            ],
            [
              'incl. commands inside scripts',
              fmt(i.emq.perMinuteWithScriptInner, 1),
              fmt(i.bull.perMinuteWithScriptInner, 1),
              x(ratio(i.emq.perMinuteWithScriptInner, i.bull.perMinuteWithScriptInner)),
            ],
          ],
        ) +
        `\n   in the window: EchoMQ ${cmds(i.emq.commands)}; BullMQ ${cmds(i.bull.commands)}`,
    )
  }
  if (t.length) parts.push(`\nTargets\n${t.map((g) => `${g.pass ? 'PASS' : 'MISS'}  ${g.name}: ${g.figures}`).join('\n')}`)
  return parts.join('\n')
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
  const results: Results = {}
  const errors: Partial<Record<Bench, string>> = {}
  try {
    ctx.log(`redis-server ${redis.version} on ${redis.host}:${redis.port}; running ${only.join(', ')}${quick ? ' (quick)' : ''}`)
    // A bench that fails is reported and the others still run.
    const attempt = async <T>(bench: Bench, run: () => Promise<T>): Promise<T | undefined> => {
      if (!only.includes(bench)) return undefined
      try {
        return await run()
      } catch (err) {
        errors[bench] = err instanceof Error ? (err.stack ?? err.message) : String(err)
        ctx.log(`${bench} FAILED: ${errors[bench]}`)
        return undefined
      }
    }
    results.sweep = await attempt('sweep', () => runSweep(ctx))
    results.heartbeat = await attempt('heartbeat', () => runHeartbeat(ctx))
    results.throughput = await attempt('throughput', () => runThroughput(ctx))
    results.idle = await attempt('idle', () => runIdle(ctx))
  } finally {
    await redis.stop()
  }
  const seconds = (Date.now() - started) / 1000
  const t = targets(results, quick)
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
  const head = `EchoMQ vs BullMQ ${env.bullmq}: one run on a fresh redis-server ${env.redis}, node ${env.node}, ${env.cpus} CPUs, ${env.mode} sizes; ratios are EchoMQ/BullMQ`
  const file = path.join(
    path.dirname(fileURLToPath(import.meta.url)),
    quick ? 'results-quick.json' : only.length < BENCHES.length ? 'results-partial.json' : 'results.json',
  )
  writeFileSync(file, `${JSON.stringify({ env, targets: t, errors, results }, null, 2)}\n`)
  console.log(report(results, t, head))
  if (Object.keys(errors).length) process.exitCode = 1
  for (const [bench, err] of Object.entries(errors)) console.log(`\nFAILED ${bench}: ${err.split('\n')[0]}`)
  console.log(`\nresults: ${path.relative(process.cwd(), file)}; total run time ${seconds.toFixed(0)} s`)
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err: unknown) => {
    console.error(err)
    process.exit(1)
  },
)
