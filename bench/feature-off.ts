/**
 * Feature off (issue 32, target 4): every feature a queue does not use costs it nothing. Per feature of
 * bench/feature-uses.ts, two EchoMQ queues on the bench's Redis: `<feature>-used`, which used the feature once
 * (and no longer does: what used it is closed), and `<feature>-never`. Then the same plain workload on both:
 *   idle      one Worker with its defaults on each queue, all 2 x features at once, each on its own client:
 *             commands SENT a minute over one window (counted on the clients, bench/count.ts; the worker's
 *             block is 60 s, a constant, so the full window is 2 minutes); and the commands of one warm
 *             reaper pass over the queue alone (QUEUES=<queue>).
 *   per job   N no-op jobs added with addBulk and run by a fresh Worker at concurrency 1 (a take and a finish
 *             per job in a fixed order, so the counts repeat), alone on the server: commands sent per job
 *             (client count), every command Redis ran per job (INFO commandstats: scripts' inner calls
 *             included, so a feature's leftover work inside a script shows), bytes in + out per job (INFO
 *             stats total_net_input_bytes / total_net_output_bytes), and after the runs the keys the used
 *             queue has that the never-used one has not.
 *   jobs/s    the same runs' throughput (add to last completion), used / never per round, alternating
 *             (used, never; never, used; ...): the median of 5 ratios with their spread; a row of two queues
 *             that never used a feature (A/A) gives the machine's noise in the same run.
 * Counts first: they are deterministic; throughput moves with the machine.
 */
import type { Redis } from 'ioredis'
import { Queue, Worker } from '../lib/index.js'
import { reaperConfig } from '../lib/reaper/config.js'
import { createReaper } from '../lib/reaper/reaper.js'
import { EMQ_PREFIX } from './build.js'
import { SentCommands, UNLABELLED } from './count.js'
import { CONTROL, FEATURES, type Feature, type UseTarget } from './feature-uses.js'
import { commandList, fmt, fs, type Target, table, x, xs } from './format.js'
import { commandStats, subtract, withoutMeter } from './meter.js'
import { type Ctx, completion, ratio, type Spread, sleep, spread, spreadOf } from './util.js'

const WARM_UP_MS = 2_000
const CHUNK = 1_000
/** One job at a time: a take and a finish per job in a fixed order, so the counts are the same run to run. */
const CONCURRENCY = 1
/** More rounds than the other benches' ROUNDS: a ratio of two runs of ~1 s each moves by a fifth on this machine. */
const ROUNDS_FULL = 5

export interface PerJobRun {
  commands: number
  /** Every command Redis ran, those scripts run inside included (INFO commandstats), per job. */
  serverCalls: number
  bytes: number
  jobsPerS: number
}

export interface FeatureRow {
  feature: string
  what: string
  idlePerMinute: { used: number; never: number }
  /** The used queue's idle commands a minute, by name. */
  idleCommands: Record<string, number>
  reaperPass: { used: number; never: number }
  keys: { used: string[]; never: string[] }
  used: PerJobRun[]
  never: PerJobRun[]
  throughput: Spread
}

export interface FeatureOffResults {
  jobs: number
  rounds: number
  windowS: number
  rows: FeatureRow[]
}

// Names of one length: a queue's name is in every key a command carries, so a longer one costs bytes.
const queueName = (f: Feature, side: 'used' | 'never') =>
  `off-${f.name === CONTROL ? 'control' : f.name}-${side === 'used' ? 'used' : 'none'}`
const SIDES = ['used', 'never'] as const

async function netBytes(meter: Redis): Promise<number> {
  const info = await meter.info('stats')
  const num = (k: string) => Number(new RegExp(`^${k}:(\\d+)`, 'm').exec(info)?.[1] ?? Number.NaN)
  return num('total_net_input_bytes') + num('total_net_output_bytes')
}

/** One measured run of the plain workload on `queue`: per-job commands and bytes, and jobs/s. */
async function plainRun(ctx: Ctx, counter: SentCommands, queue: string, n: number): Promise<PerJobRun> {
  const connection = { host: ctx.redis.host, port: ctx.redis.port, maxRetriesPerRequest: null }
  const bytes0 = await netBytes(ctx.redis.meter)
  const stats0 = await commandStats(ctx.redis.meter)
  counter.reset()
  const t0 = performance.now()
  const q = new Queue(queue, { connection, prefix: EMQ_PREFIX })
  for (let i = 0; i < n; i += CHUNK)
    await q.addBulk(Array.from({ length: Math.min(CHUNK, n - i) }, (_, k) => ({ name: 'j', data: { i: i + k } })))
  const done = completion(n, `feature-off ${queue}`)
  const worker = new Worker(queue, async () => 'ok', { connection, prefix: EMQ_PREFIX, concurrency: CONCURRENCY })
  worker.on('completed', () => done.one())
  worker.on('error', (err) => done.fail(err))
  await done.promise
  const took = performance.now() - t0
  await worker.close()
  await q.close()
  const commands = counter.total(UNLABELLED)
  // The meter's INFO calls are in the bytes: the same on both sides.
  const bytes = (await netBytes(ctx.redis.meter)) - bytes0
  const calls = Object.values(withoutMeter(subtract(await commandStats(ctx.redis.meter), stats0))).reduce((a, c) => a + c.calls, 0)
  return { commands: commands / n, serverCalls: calls / n, bytes: bytes / n, jobsPerS: (n / took) * 1000 }
}

/** Idle: a Worker with defaults on every queue at once; commands a minute per queue. */
async function idleWindow(
  ctx: Ctx,
  counter: SentCommands,
  queues: string[],
  windowS: number,
): Promise<Record<string, Record<string, number>>> {
  const workers = queues.map((name) => {
    const client = counter.label(ctx.redis.connect(`idle-${name}`), name)
    const worker = new Worker(name, async () => 'ok', { connection: client, prefix: EMQ_PREFIX })
    worker.on('error', (err) => ctx.log(`feature-off idle worker ${name}: ${String(err)}`))
    return { worker, client }
  })
  try {
    await sleep(WARM_UP_MS)
    counter.reset()
    await sleep(windowS * 1000)
    const perMinute = (c: Record<string, number>) => Object.fromEntries(Object.entries(c).map(([k, v]) => [k, (v * 60) / windowS]))
    return Object.fromEntries(queues.map((name) => [name, perMinute(counter.sent(name))]))
  } finally {
    for (const { worker, client } of workers) {
      await worker.close()
      client.disconnect()
    }
  }
}

/** Commands of one warm reaper pass over `queue` alone (the first pass, discovery and checks, is not counted). */
async function reaperPass(ctx: Ctx, counter: SentCommands, queue: string): Promise<number> {
  const config = reaperConfig({ redisUrl: `redis://${ctx.redis.host}:${ctx.redis.port}`, metricsMode: 'off' }, { QUEUES: queue })
  const reaper = createReaper(config, { log: () => undefined })
  try {
    await reaper.run()
    counter.reset()
    await reaper.run()
    return counter.total(UNLABELLED)
  } finally {
    await reaper.close()
  }
}

/** The queue's keys but its retained jobs' hashes (those are retention's, not a feature's). */
async function queueKeys(meter: Redis, queue: string): Promise<string[]> {
  const base = `${EMQ_PREFIX}:{${queue}}:`
  const jobs = new Set([...(await meter.zrange(`${base}completed`, '0', '-1')), ...(await meter.zrange(`${base}failed`, '0', '-1'))])
  return (await meter.keys(`${base}*`))
    .map((k) => k.slice(base.length))
    .filter((k) => !jobs.has(k))
    .sort()
}

export async function runFeatureOff(ctx: Ctx): Promise<FeatureOffResults> {
  const jobs = ctx.quick ? 500 : 5_000
  const rounds = ctx.quick ? 1 : ROUNDS_FULL
  const windowS = ctx.quick ? 10 : 120
  const { meter } = ctx.redis
  await meter.flushall()
  const counter = new SentCommands().install()
  counter.label(meter, 'meter')
  try {
    for (const f of FEATURES) {
      const target: UseTarget = { queue: queueName(f, 'used'), host: ctx.redis.host, port: ctx.redis.port }
      await f.use(target)
      ctx.log(`feature-off: ${target.queue} used (${f.what})`)
    }
    const all = FEATURES.flatMap((f) => SIDES.map((side) => queueName(f, side)))
    const idle = await idleWindow(ctx, counter, all, windowS)
    ctx.log(`feature-off: idle window of ${windowS} s done`)
    const rows: FeatureRow[] = []
    for (const f of FEATURES) {
      const passes = {
        used: await reaperPass(ctx, counter, queueName(f, 'used')),
        never: await reaperPass(ctx, counter, queueName(f, 'never')),
      }
      const used: PerJobRun[] = []
      const never: PerJobRun[] = []
      // Used first in even rounds, never first in odd ones: a run's place in the pair does not favour a side.
      for (let round = 0; round < rounds; round++) {
        for (const side of round % 2 ? (['never', 'used'] as const) : SIDES)
          (side === 'used' ? used : never).push(await plainRun(ctx, counter, queueName(f, side), jobs))
      }
      rows.push({
        feature: f.name,
        what: f.what,
        idlePerMinute: { used: sum(idle[queueName(f, 'used')]), never: sum(idle[queueName(f, 'never')]) },
        idleCommands: idle[queueName(f, 'used')] ?? {},
        reaperPass: passes,
        keys: { used: await queueKeys(meter, queueName(f, 'used')), never: await queueKeys(meter, queueName(f, 'never')) },
        used,
        never,
        throughput: spread(used.map((u, i) => ratio(u.jobsPerS, (never[i] as PerJobRun).jobsPerS))),
      })
      ctx.log(`feature-off ${f.name}: ${rounds} rounds of ${jobs} jobs done`)
    }
    return { jobs, rounds, windowS, rows }
  } finally {
    counter.uninstall()
    await meter.flushall()
  }
}

const sum = (c: Record<string, number> | undefined) => Object.values(c ?? {}).reduce((a, b) => a + b, 0)
const med = (runs: PerJobRun[], f: keyof PerJobRun) => spreadOf(runs, (r) => r[f]).median
/** Keys the used queue has after its use that the never-used one has not. */
const extraKeys = (r: FeatureRow) => r.keys.used.filter((k) => !r.keys.never.includes(k))

export function featureOffReport(r: FeatureOffResults): string {
  return (
    `Feature off: a queue that used a feature once (and no longer does) against one that never did; plain no-op jobs, ` +
    `${r.jobs} per run, ${r.rounds} alternating rounds; idle over one ${r.windowS} s window, every queue's Worker at once\n` +
    table(
      [
        'feature',
        'idle cmds/min used / never',
        'reaper pass cmds',
        'cmds/job used / never',
        'Redis calls/job',
        'bytes/job used / never',
        'jobs/s used / never (never)',
        'keys only the used queue has',
      ],
      r.rows.map((row) => [
        row.feature,
        `${fmt(row.idlePerMinute.used, 1)} / ${fmt(row.idlePerMinute.never, 1)}`,
        `${row.reaperPass.used} / ${row.reaperPass.never}`,
        `${fmt(med(row.used, 'commands'), 3)} / ${fmt(med(row.never, 'commands'), 3)}`,
        `${fmt(med(row.used, 'serverCalls'), 2)} / ${fmt(med(row.never, 'serverCalls'), 2)}`,
        `${fmt(med(row.used, 'bytes'))} / ${fmt(med(row.never, 'bytes'))}`,
        `${xs(row.throughput)} of ${fs(spreadOf(row.never, (n) => n.jobsPerS))}`,
        extraKeys(row).join(', ') || 'none',
      ]),
    ) +
    `\n   idle, by command (the used queues; the never-used ones the same): ${[...new Set(r.rows.map((row) => commandList(row.idleCommands)))].join(' | ')}` +
    '\n   idle: commands sent a minute by a default Worker on the queue (60 s blocks: read with a window under 60 s, they say little); ' +
    "reaper pass: commands of a warm pass over that queue alone; Redis calls: every command Redis ran (scripts' inner ones included, " +
    'INFO commandstats); keys: after the workload, those the used queue holds and the never-used one does not (retained jobs left out).'
  )
}

/**
 * Within noise: counts equal to 1 % (bytes 2 %, idle 0.5 a minute), and throughput's ratios straddling 1, or
 * a median of at least 0.95, or at least the A/A row's lowest ratio (the machine's noise in the same run).
 * Keys left are printed, not judged: the target is work.
 */
export function featureOffTargets(r: FeatureOffResults): Target[] {
  const floor = r.rows.find((row) => row.feature === CONTROL)?.throughput.min ?? 1
  return r.rows.map((row) => {
    const cmds = ratio(med(row.used, 'commands'), med(row.never, 'commands'))
    const calls = ratio(med(row.used, 'serverCalls'), med(row.never, 'serverCalls'))
    const bytes = ratio(med(row.used, 'bytes'), med(row.never, 'bytes'))
    const idle = row.idlePerMinute.used - row.idlePerMinute.never
    const t = row.throughput
    const noise = (t.min <= 1 && t.max >= 1) || t.median >= Math.min(0.95, floor)
    const counts = idle <= 0.5 && row.reaperPass.used <= row.reaperPass.never && cmds <= 1.01 && calls <= 1.01 && bytes <= 1.02
    return {
      name: `feature off: ${row.feature} used once costs a queue nothing (idle, reaper pass, commands, Redis calls, bytes, jobs/s)`,
      pass: counts && noise,
      figures:
        `idle ${fmt(row.idlePerMinute.used, 1)} vs ${fmt(row.idlePerMinute.never, 1)}/min, reaper ${row.reaperPass.used} vs ${row.reaperPass.never}, ` +
        `cmds/job ${fmt(cmds, 3)}x, Redis calls/job ${fmt(calls, 3)}x, bytes/job ${fmt(bytes, 3)}x, ` +
        `keys ${extraKeys(row).join(' ') || 'none'}, jobs/s ${xs(t)} (A/A lowest ${x(floor)})`,
    }
  })
}
