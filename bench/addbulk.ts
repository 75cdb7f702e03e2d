/**
 * addBulk: the wall time of ONE `queue.addBulk(jobs)` call of JOBS jobs (DATA_BYTES bytes of JSON data
 * each, no options), EchoMQ against BullMQ's `queue.addBulk`, RUNS alternating runs per side. Each run: a
 * fresh server (FLUSHALL), a new client, and a Queue that first adds WARM_JOBS jobs to another queue on
 * that client (connection up, scripts loaded), then the timed call on an empty queue; the jobs array is
 * built before the clock starts. Speed ratio = BullMQ ms / EchoMQ ms, run by run (> 1: EchoMQ faster).
 * Also, per call: Redis CPU (INFO cpu, user + sys) and the longest command as Redis ran it (SLOWLOG at a
 * 1 ms threshold, the meter's and script-inner entries left out): both libraries send the bulk in one
 * MULTI, which holds Redis while it runs.
 */
import { Queue as BullQueue } from 'bullmq'
import type { Redis } from 'ioredis'
import { Queue } from '../lib/index.js'
import { BULL_PREFIX, EMQ_PREFIX } from './build.js'
import { fmt, fs, type Target, table, xs } from './format.js'
import { redisCpuUs, resetStats, slowlogThreshold, topLevelSlowlog } from './meter.js'
import { alternate, type Ctx, payload, ratios, type Spread, spreadOf } from './util.js'

const DATA_BYTES = 100
const WARM_JOBS = 100
/** Runs per side: one call is short, so more than ROUNDS. */
const RUNS = 5
const SLOW_US = 1_000

type Lib = 'emq' | 'bull'

export interface AddBulkRun {
  jobs: number
  ms: number
  jobsPerSec: number
  redisCpuMs: number
  /** Longest command of the call as Redis ran it (µs; 0 when none took SLOW_US or more), and its name. */
  longestUs: number
  longestCmd: string
}

export interface AddBulkSide {
  runs: AddBulkRun[]
  ms: Spread
  redisCpuMs: Spread
  longestUs: Spread
  longestCmd: string
}

export interface AddBulkResults {
  jobs: number
  dataBytes: number
  emq: AddBulkSide
  bull: AddBulkSide
  /** BullMQ ms / EchoMQ ms, run by run. */
  speed: Spread
}

interface BulkQueue {
  addBulk(jobs: { name: string; data: unknown }[]): Promise<unknown[]>
  close(): Promise<void>
}

function queueOf(lib: Lib, name: string, client: Redis): BulkQueue {
  return lib === 'emq'
    ? new Queue(name, { connection: client, prefix: EMQ_PREFIX })
    : new BullQueue(name, { connection: client, prefix: BULL_PREFIX })
}

async function oneRun(ctx: Ctx, lib: Lib, n: number): Promise<AddBulkRun> {
  const { meter } = ctx.redis
  await meter.flushall()
  const client = ctx.redis.connect(`${lib}-addbulk`)
  const warm = queueOf(lib, `ab-warm-${lib}`, client)
  const queue = queueOf(lib, `ab-${lib}`, client)
  try {
    await warm.addBulk(Array.from({ length: WARM_JOBS }, (_, i) => ({ name: 'job', data: payload(i, DATA_BYTES) })))
    const jobs = Array.from({ length: n }, (_, i) => ({ name: 'job', data: payload(i, DATA_BYTES) }))
    await slowlogThreshold(meter, SLOW_US)
    await resetStats(meter)
    const cpu0 = await redisCpuUs(meter)
    const t0 = performance.now()
    const added = await queue.addBulk(jobs)
    const ms = performance.now() - t0
    const cpu = (await redisCpuUs(meter)) - cpu0
    const slow = (await topLevelSlowlog(meter)).sort((a, b) => b.usec - a.usec)
    await slowlogThreshold(meter, -1)
    if (added.length !== n) throw new Error(`${lib} addBulk: ${added.length} of ${n} jobs returned`)
    return {
      jobs: n,
      ms,
      jobsPerSec: Math.round((n / ms) * 1000),
      redisCpuMs: cpu / 1000,
      longestUs: slow[0]?.usec ?? 0,
      longestCmd: slow[0]?.cmd ?? '-',
    }
  } finally {
    await warm.close()
    await queue.close()
    client.disconnect()
  }
}

const summary = (runs: AddBulkRun[]): AddBulkSide => ({
  runs,
  ms: spreadOf(runs, (r) => r.ms),
  redisCpuMs: spreadOf(runs, (r) => r.redisCpuMs),
  longestUs: spreadOf(runs, (r) => r.longestUs),
  longestCmd: [...new Set(runs.map((r) => r.longestCmd))].join('/'),
})

export async function runAddBulk(ctx: Ctx): Promise<AddBulkResults> {
  const jobs = ctx.quick ? 2_000 : 10_000
  // Unmeasured: each side's code compiled and warmed up once.
  for (const lib of ['emq', 'bull'] as const) await oneRun(ctx, lib, 1_000)
  const runs = await alternate(RUNS, { emq: () => oneRun(ctx, 'emq', jobs), bull: () => oneRun(ctx, 'bull', jobs) })
  await ctx.redis.meter.flushall()
  const result: AddBulkResults = {
    jobs,
    dataBytes: DATA_BYTES,
    emq: summary(runs.emq),
    bull: summary(runs.bull),
    speed: ratios(runs.bull, runs.emq, (r) => r.ms),
  }
  ctx.log(`addbulk ${jobs}: EchoMQ ${fs(result.emq.ms)} ms, BullMQ ${fs(result.bull.ms)} ms; speed ${xs(result.speed)}`)
  return result
}

export function addBulkReport(r: AddBulkResults): string {
  const row = (name: string, s: AddBulkSide) => [
    name,
    fs(s.ms),
    fmt((r.jobs / s.ms.median) * 1000),
    fs(s.redisCpuMs),
    `${fs(s.longestUs)} (${s.longestCmd})`,
  ]
  return (
    `addBulk: one call of ${fmt(r.jobs)} jobs (${r.dataBytes}-byte JSON data), median (min-max) of ${RUNS} alternating runs\n` +
    table(
      ['', 'wall ms', 'jobs/s', 'Redis CPU ms', 'longest command µs (SLOWLOG >= 1 ms)'],
      [row('EchoMQ', r.emq), row('BullMQ', r.bull)],
    ) +
    `\n   speed EchoMQ vs BullMQ (BullMQ ms / EchoMQ ms, run by run): ${xs(r.speed)}`
  )
}

export function addBulkTargets(r: AddBulkResults): Target[] {
  return [
    {
      name: `addbulk: one addBulk of ${fmt(r.jobs)} jobs at >= 1.0x BullMQ's speed`,
      pass: r.speed.median >= 1,
      figures: `${fmt(r.emq.ms.median)} vs ${fmt(r.bull.ms.median)} ms = ${xs(r.speed)} speed; Redis CPU ${fmt(r.emq.redisCpuMs.median)} vs ${fmt(r.bull.redisCpuMs.median)} ms`,
    },
  ]
}
