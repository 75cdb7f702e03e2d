/**
 * getMetrics in BullMQ's shape, from the per-minute counts every queue keeps for the dashboard (the
 * `metrics` hash: finished jobs per minute over the last hour, lua/includes/minutes.lua). BullMQ keeps
 * them only for workers given `metrics: { maxDataPoints }`, all time; EchoMQ keeps the last hour always,
 * so the shape is BullMQ's over that hour:
 *   data        jobs per minute, newest first: the 59 whole minutes before the current one (BullMQ adds a
 *               minute once it is over), ranked by `start`..`end` as LRANGE does
 *   count       the data points held (59)
 *   meta.count  jobs counted over the hour, the current minute included (BullMQ: since counting began)
 *   meta.prevTS the start of the current minute (ms); meta.prevCount: meta.count before it
 */
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { finishedPerMinute } from '../redis/queries.js'
import { checkInteger, describe, fail } from '../validate.js'

/**
 * BullMQ's MetricsTime: data points (minutes) for a Worker's `metrics: { maxDataPoints }`, which EchoMQ takes
 * and checks; its counts cover the last hour whatever the option.
 */
export const MetricsTime = {
  ONE_MINUTE: 1,
  FIVE_MINUTES: 5,
  FIFTEEN_MINUTES: 15,
  THIRTY_MINUTES: 30,
  ONE_HOUR: 60,
  ONE_WEEK: 10080,
  TWO_WEEKS: 20160,
  ONE_MONTH: 80640,
} as const

/** BullMQ's Metrics. */
export interface Metrics {
  meta: { count: number; prevTS: number; prevCount: number }
  data: number[]
  count: number
}

const RANK = { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }

export function checkMetricsArgs(type: unknown, start: unknown, end: unknown): void {
  if (type !== 'completed' && type !== 'failed')
    fail('ERR_OPTIONS', `expected getMetrics' type to be completed or failed, got: ${describe(type)}`)
  checkInteger('start', start, RANK)
  checkInteger('end', end, RANK)
}

export async function readMetrics(
  client: RedisClient,
  keys: QueueKeys,
  type: 'completed' | 'failed',
  start: number,
  end: number,
): Promise<Metrics> {
  const minutes = await finishedPerMinute(client, keys)
  const counts = minutes.map((m) => m[type])
  const current = minutes[minutes.length - 1]
  const now = counts[counts.length - 1] ?? 0
  const total = counts.reduce((a, b) => a + b, 0)
  const data = counts.slice(0, -1).reverse()
  const from = Math.max(0, start < 0 ? data.length + start : start)
  const to = Math.min(data.length - 1, end < 0 ? data.length + end : end)
  return {
    meta: { count: total, prevTS: (current?.minute ?? 0) * 60_000, prevCount: total - now },
    data: to < from ? [] : data.slice(from, to + 1),
    count: data.length,
  }
}
