/**
 * sweep(): one pass of the two-phase stalled-job sweep over one queue, returning what it did.
 *
 * A job in `active` whose lease has expired is marked on the first pass and recovered on a later pass
 * that still finds it stalled with a mark at least `graceMs` old: attemptsMade + 1, then back to `wait`
 * (served next) or to `failed` when no attempts are left. Each step is one script call, so any number of
 * overlapping sweeps recover a job exactly once. The pass walks the lease index from the earliest
 * deadline and stops at the first live one: its cost grows with the number of expired leases, not with
 * the number of healthy jobs in flight. Each call handles at most `limit` candidates.
 *
 * Each pass also audits a window of `audit` in-flight jobs picked at random, whatever their deadline, so
 * a lease key deleted by hand or evicted (run Redis with `maxmemory-policy noeviction`) is found before
 * its recorded deadline: at once in a queue with no more jobs in flight than that, else within a few
 * passes. Its cost is bounded by `audit`, not by the number of jobs in flight.
 *
 * Options: prefix ('emq'), graceMs (0: one sweep interval is the grace), limit (100 candidates per call),
 * audit (32 jobs per pass; 0 turns the audit off).
 */
import { randomInt } from 'node:crypto'
import { sweepStep } from './commands.js'
import { closeConnection, failFast, lastConnectionError, openConnection, type RedisClient } from './connection.js'
import { redisError } from './errors.js'
import { queueKeys } from './keys.js'
import { DEFAULTS, type SweepSettings, sweepSettings, validateQueueName } from './options.js'

export interface SweepResult {
  marked: string[]
  recovered: string[]
  failed: string[]
}

export interface SweepOptions {
  prefix?: string
  graceMs?: number
  limit?: number
  audit?: number
}

export async function sweep(connection: unknown, queue: string, options?: SweepOptions): Promise<SweepResult> {
  validateQueueName(queue)
  const settings = sweepSettings(options)
  const conn = openConnection(connection, { redisOptions: failFast(DEFAULTS.redisTimeoutMs) })
  try {
    return await sweepWith(conn.client, queue, settings)
  } catch (err) {
    throw redisError(queue, 'sweep', err, lastConnectionError(conn.client))
  } finally {
    await closeConnection(conn)
  }
}

async function sweepWith(client: RedisClient, queue: string, { prefix, graceMs, limit, audit }: SweepSettings): Promise<SweepResult> {
  const keys = queueKeys(prefix, queue)
  const result: SweepResult = { marked: [], recovered: [], failed: [] }
  const step = async (ids: string[], mode: 'deadline' | 'audit') => {
    const reply = await sweepStep(client, keys, { graceMs, mode, ids })
    for (const id of reply.marked) if (!result.marked.includes(id)) result.marked.push(id)
    result.recovered.push(...reply.recovered)
    result.failed.push(...reply.failed)
    return reply
  }
  let offset = 0
  for (;;) {
    const ids = await client.zrange(keys.active, String(offset), String(offset + limit - 1))
    if (ids.length === 0) break
    const { left, done } = await step(ids, 'deadline')
    if (done || ids.length < limit) break
    // Candidates that stay in `active` (marked, within grace) keep their rank; step past them.
    offset += left
  }
  if (audit > 0) {
    const inFlight = await client.zcard(keys.active)
    if (inFlight > 0) {
      const start = inFlight > audit ? randomInt(inFlight - audit + 1) : 0
      const ids = await client.zrange(keys.active, String(start), String(start + audit - 1))
      if (ids.length > 0) await step(ids, 'audit')
    }
  }
  return result
}
