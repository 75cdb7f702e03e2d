/**
 * Retention memory: Redis `used_memory` while a queue completes many jobs, with each side's default
 * settings (EchoMQ keeps the last 1,000 completed for a day; BullMQ keeps every one) and with BullMQ set
 * to a comparable retention (removeOnComplete { count: 1000, age: 86400 }: BullMQ's age is in seconds).
 * Jobs (DATA_BYTES of JSON data) are added and completed in steps of the first checkpoint's size, so each
 * step peaks at the same number of keys: the keyspace's hash table is sized by its peak and not shrunk
 * while a tenth full (added 40,000 at once, a queue keeping 1,000 holds 57 KiB more of buckets, which
 * is Redis's sizing, not what a job kept costs). After each checkpoint, with only the meter
 * connected, the server's used_memory above the empty (warmed-up) server, its key count (DBSIZE: the
 * side's keys only) and the completed set's size are read. EchoMQ's worker trims `completed` in batches
 * once it passes its count plus a tenth, so the set, and the memory, swing between 1,000 and about 1,100
 * jobs: "flat" is judged as the set staying within that at every step, and the bytes per job kept not
 * growing with the jobs completed (<= FLAT x the first step's), the raw figures printed beside.
 */

import { DEFAULTS } from '../lib/options.js'
import { fmt, type Target, table } from './format.js'
import { addJobs, CONCURRENCY, CONFIGS, completedCount, completeJobs, DATA_BYTES, usedMemory, warmQueue } from './memory.js'
import type { Ctx } from './util.js'

/** EchoMQ's default retention count, and what `completed` may exceed it by: the trim slack (a tenth of the
 * count, lua/includes/retention.lua) plus the finishes of one worker in flight while a trim runs. */
const KEEP = DEFAULTS.removeOnComplete.count
const KEEP_MAX = KEEP + Math.ceil(KEEP / 10) + CONCURRENCY
/** Bytes per job kept at the last step over the first that still count as flat. */
const FLAT = 1.1

export interface RetentionPoint {
  completed: number
  usedMemory: number
  /** used_memory above the empty server. */
  growth: number
  keys: number
  completedKept: number
}

export interface RetentionRow {
  side: 'emq' | 'bull' | 'bullCount'
  label: string
  points: RetentionPoint[]
}

export interface RetentionResults {
  dataBytes: number
  rows: RetentionRow[]
}

async function measureSide(ctx: Ctx, side: RetentionRow['side'], checkpoints: number[], step: number): Promise<RetentionRow> {
  const config = CONFIGS[side]
  const queue = 'ret'
  const { meter } = ctx.redis
  await warmQueue(ctx, config, queue)
  const empty = await usedMemory(meter)
  const points: RetentionPoint[] = []
  let done = 0
  for (const checkpoint of checkpoints) {
    while (done < checkpoint) {
      const n = Math.min(step, checkpoint - done)
      await addJobs(ctx, config, queue, done + 1_000_000, n)
      await completeJobs(ctx, config, queue, n)
      done += n
    }
    const used = await usedMemory(meter)
    points.push({
      completed: done,
      usedMemory: used,
      growth: used - empty,
      keys: await meter.dbsize(),
      completedKept: await completedCount(meter, config, queue),
    })
  }
  ctx.log(
    `retention ${side}: ${points.map((p) => `${fmt(p.completed)} completed -> ${fmt(p.growth / 1024)} KiB, ${fmt(p.keys)} keys`).join('; ')}`,
  )
  return { side, label: config.label, points }
}

export async function runRetention(ctx: Ctx): Promise<RetentionResults> {
  const checkpoints = ctx.quick ? [2_000, 4_000, 6_000] : [10_000, 50_000, 100_000]
  const rows: RetentionRow[] = []
  for (const side of ['emq', 'bull', 'bullCount'] as const) rows.push(await measureSide(ctx, side, checkpoints, checkpoints[0] as number))
  await ctx.redis.meter.flushall()
  return { dataBytes: DATA_BYTES, rows }
}

const mib = (bytes: number) => `${fmt(bytes / 1024 / 1024, 2)} MiB`

export function retentionReport(r: RetentionResults): string {
  const checkpoints = r.rows[0]?.points.map((p) => p.completed) ?? []
  return (
    `Retention memory: Redis used_memory above the empty server after N jobs completed (${r.dataBytes}-byte data); keys = DBSIZE; one run\n` +
    table(
      ['', ...checkpoints.flatMap((n) => [`${fmt(n)}: used_memory`, 'keys', 'completed kept'])],
      r.rows.map((row) => [row.label, ...row.points.flatMap((p) => [mib(p.growth), fmt(p.keys), fmt(p.completedKept)])]),
    )
  )
}

export function retentionTargets(r: RetentionResults): Target[] {
  const emq = r.rows.find((row) => row.side === 'emq')
  const first = emq?.points[0]
  const last = emq?.points[emq.points.length - 1]
  if (!emq || !first || !last) return []
  const bull = r.rows.find((row) => row.side === 'bull')?.points.at(-1)
  const bullCount = r.rows.find((row) => row.side === 'bullCount')?.points.at(-1)
  const perKept = (p: RetentionPoint) => p.growth / p.completedKept
  const bounded = emq.points.every((p) => p.completedKept <= KEEP_MAX)
  return [
    {
      name:
        `retention: EchoMQ memory flat with its defaults (completed kept <= ${fmt(KEEP_MAX)} at every step; ` +
        `bytes per job kept at ${fmt(last.completed)} <= ${FLAT}x at ${fmt(first.completed)})`,
      pass: bounded && perKept(last) <= perKept(first) * FLAT,
      figures:
        `${emq.points.map((p) => `${fmt(p.completed)}: ${mib(p.growth)}, ${fmt(p.completedKept)} kept, ${fmt(perKept(p))} B/kept`).join('; ')} ` +
        `(${fmt(last.keys)} keys); BullMQ defaults ${bull ? mib(bull.growth) : '?'}, BullMQ count 1000 ${bullCount ? mib(bullCount.growth) : '?'}`,
    },
  ]
}
