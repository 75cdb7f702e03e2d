/**
 * A queue's jobs, read with plain commands (no script): candidates for a take, pages of ids, hashes,
 * counts, logs; and the few single-field writes that need no script.
 */
import type { ChainableCommander } from 'ioredis'
import type { JobState, QueueCounts, StoredState } from '../job.js'
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'
import { serverTimeMs } from './server.js'

/**
 * Up to `n` ids next in line, the next first: the tail of `wait`, then (jobs without a priority run first)
 * the head of `prioritized`. The candidates for `take`; both read in one round trip. With `more`, up to
 * that many of `wait`'s ids after them follow (none of `prioritized`: a prioritized job that fails goes back
 * there, and may rank ahead of the ids read after it; one of `wait` goes behind them).
 */
export async function readCandidates(client: RedisClient, keys: QueueKeys, n: number, more = 0): Promise<string[]> {
  const [waiting, prioritized] = await Promise.all([
    client.lrange(keys.wait, -(n + more), -1),
    client.zrange(keys.prioritized, '0', String(n - 1)),
  ])
  waiting.reverse()
  return [...[...waiting, ...prioritized].slice(0, n), ...waiting.slice(n)]
}

/** A job's hash, {} when there is none. */
export function readJob(client: RedisClient, keys: QueueKeys, id: string): Promise<Record<string, string>> {
  return client.hgetall(keys.job(id))
}

/** Several jobs' hashes, in the order of `ids` ({} for a job removed meanwhile). */
export function readJobs(client: RedisClient, keys: QueueKeys, ids: string[]): Promise<Record<string, string>[]> {
  return Promise.all(ids.map((id) => client.hgetall(keys.job(id))))
}

/**
 * A page of ids in one state (`start`, `end`: inclusive ranks): `wait` in the order they will run (those
 * busy workers reserved first), `delayed` by due time, `active` by lease deadline, `completed` and `failed`
 * most recent first.
 */
export async function idsIn(client: RedisClient, keys: QueueKeys, state: StoredState, start: number, end: number): Promise<string[]> {
  switch (state) {
    case 'waiting-children':
      return client.zrange(keys.waitingChildren, String(start), String(end))
    case 'wait': {
      const reserved = await client.zrange(keys.reserved, String(start), String(end))
      const skip = Math.max(0, start - (await client.zcard(keys.reserved)))
      const more = end - start + 1 - reserved.length
      if (more <= 0) return reserved
      return [...reserved, ...(await client.lrange(keys.wait, -(skip + more), -(skip + 1))).reverse()]
    }
    case 'delayed':
    case 'prioritized':
      return client.zrange(keys[state], String(start), String(end))
    case 'active':
      return client.zrange(keys.active, String(start), String(end))
    default:
      return client.zrevrange(keys[state], String(start), String(end))
  }
}

/** How many jobs one state holds (`wait`: with those busy workers reserved). */
export async function stateSize(client: RedisClient, keys: QueueKeys, state: StoredState): Promise<number> {
  if (state === 'waiting-children') return client.zcard(keys.waitingChildren)
  if (state === 'wait') {
    const [waiting, reserved] = await Promise.all([client.llen(keys.wait), client.zcard(keys.reserved)])
    return waiting + reserved
  }
  return client.zcard(keys[state])
}

/**
 * Ids of one state by rank, BullMQ's way: `asc` oldest first (wait: next to run first; delayed: due first;
 * active: earliest lease deadline first; completed, failed: finished first), else newest first. `start`
 * and `end` are inclusive ranks from 0, already within the state's size.
 */
export async function pageIds(
  client: RedisClient,
  keys: QueueKeys,
  state: StoredState,
  start: number,
  end: number,
  asc: boolean,
): Promise<string[]> {
  if (end < start) return []
  if (state !== 'wait') {
    const key = state === 'waiting-children' ? keys.waitingChildren : keys[state]
    return asc ? client.zrange(key, String(start), String(end)) : client.zrange(key, String(start), String(end), 'REV')
  }
  // `wait` in run order is the reserved ids (reserved first, first) and then the list from its tail.
  const reserved = await client.zcard(keys.reserved)
  const waiting = await client.llen(keys.wait)
  const ids: string[] = []
  if (asc) {
    if (start < reserved) ids.push(...(await client.zrange(keys.reserved, String(start), String(Math.min(end, reserved - 1)))))
    const from = Math.max(0, start - reserved)
    const to = end - reserved
    if (to >= from) ids.push(...(await client.lrange(keys.wait, -(to + 1), -(from + 1))).reverse())
    return ids
  }
  if (start < waiting) ids.push(...(await client.lrange(keys.wait, start, Math.min(end, waiting - 1))))
  const from = Math.max(0, start - waiting)
  const to = end - waiting
  if (to >= from) ids.push(...(await client.zrange(keys.reserved, String(from), String(to), 'REV')))
  return ids
}

/** The oldest `n` ids of a sorted set (the earliest due delayed jobs; the oldest finished jobs). */
export function oldestIds(client: RedisClient, key: string, n: number): Promise<string[]> {
  return client.zrange(key, '0', String(n - 1))
}

/** `n` delayed ids, the soonest due first, after the first `skip`. */
export function firstDelayed(client: RedisClient, keys: QueueKeys, n: number, skip = 0): Promise<string[]> {
  return client.zrange(keys.delayed, skip, skip + n - 1)
}

/** Delayed ids due at or before `now`. */
export function dueDelayed(client: RedisClient, keys: QueueKeys, now: number, limit: number): Promise<string[]> {
  return client.zrangebyscore(keys.delayed, '-inf', now, 'LIMIT', 0, limit)
}

/** When a waiting job entered `wait` (ms, Redis's clock; a job that waits since it was added has no
 * `waitingSince`: its createdOn), undefined when unknown. */
export async function waitingSince(client: RedisClient, keys: QueueKeys, id: string): Promise<number | undefined> {
  const [since, created] = await client.hmget(keys.job(id), 'waitingSince', 'createdOn')
  const at = Number(since ?? created)
  return Number.isFinite(at) && at > 0 ? at : undefined
}

/** How many of these jobs' leases are still there. */
export function liveLeases(client: RedisClient, keys: QueueKeys, ids: string[]): Promise<number> {
  return ids.length === 0 ? Promise.resolve(0) : client.exists(...ids.map((id) => keys.lock(id)))
}

/** Each in-flight job's lease: ms left (-2 when gone), and when a sweep marked it (undefined if not). */
export async function leaseStates(
  client: RedisClient,
  keys: QueueKeys,
  ids: string[],
): Promise<{ ttlMs: number; markedAt: number | undefined }[]> {
  return Promise.all(
    ids.map(async (id) => {
      const [ttlMs, markedAt] = await Promise.all([client.pttl(keys.lock(id)), client.zscore(keys.stalled, id)])
      return { ttlMs, markedAt: markedAt === null ? undefined : Number(markedAt) }
    }),
  )
}

/**
 * The replies of `reads` queued in one MULTI on the queue's own keys (one slot): a snapshot, as no job moves
 * between two of its reads. A Redis out of memory refuses every command queued in a MULTI, reads too: then
 * the same reads, pipelined (the operator needs the counts most when Redis is full).
 */
async function snapshotReads(client: RedisClient, reads: (batch: ChainableCommander) => ChainableCommander): Promise<unknown[]> {
  let replies: [Error | null, unknown][] | null
  try {
    replies = await reads(client.multi()).exec()
  } catch (err) {
    if (!/EXECABORT/.test((err as Error).message)) throw err
    replies = await reads(client.pipeline()).exec()
  }
  if (!replies) throw new Error('the transaction was aborted')
  return replies.map(([err, v]) => {
    if (err) throw err
    return v
  })
}

/**
 * Each job counted once (QueueCounts): a reservation from `prioritized` keeps its score in `reservedScores`,
 * and every id of `stalled` is in `active` (leaveActive.lua removes both), so those are taken off the others.
 * One snapshot (snapshotReads).
 */
export async function readCounts(client: RedisClient, keys: QueueKeys): Promise<QueueCounts> {
  const [wait = 0, reserved = 0, active = 0, stalled = 0, delayed = 0, completed = 0, failed = 0, prioritized = 0, scored = 0] =
    (await snapshotReads(client, (batch) => countReads(batch, keys))) as number[]
  return {
    wait: wait + Math.max(0, reserved - scored),
    prioritized: prioritized + scored,
    active: Math.max(0, active - stalled),
    stalled,
    delayed,
    completed,
    failed,
  }
}

function countReads(batch: ChainableCommander, keys: QueueKeys): ChainableCommander {
  return batch
    .llen(keys.wait)
    .zcard(keys.reserved)
    .zcard(keys.active)
    .zcard(keys.stalled)
    .zcard(keys.delayed)
    .zcard(keys.completed)
    .zcard(keys.failed)
    .zcard(keys.prioritized)
    .hlen(keys.reservedScores)
}

/** The part of a `prioritized` score that is the priority (lua/includes/enter.lua: priority * 2^32 + a counter). */
const PRIORITY_SCALE = 2 ** 32

/**
 * Waiting jobs of each priority (0: those without one, in `wait`), reservations counted where they came from,
 * as readCounts counts them. One snapshot (snapshotReads).
 */
export async function readCountsPerPriority(client: RedisClient, keys: QueueKeys, priorities: number[]): Promise<number[]> {
  const [wait, reserved, scores, ...perPriority] = (await snapshotReads(client, (batch) => {
    batch.llen(keys.wait).zcard(keys.reserved).hvals(keys.reservedScores)
    for (const p of priorities) batch.zcount(keys.prioritized, p * PRIORITY_SCALE, (p + 1) * PRIORITY_SCALE - 1)
    return batch
  })) as [number, number, string[], ...number[]]
  const of = (p: number) => scores.filter((s) => Math.floor(Number(s) / PRIORITY_SCALE) === p).length
  return priorities.map((p, i) => (p === 0 ? wait + reserved - scores.length : (perPriority[i] ?? 0) + of(p)))
}

/** How many parents wait for their children (BullMQ's waiting-children count). */
export function waitingChildrenCount(client: RedisClient, keys: QueueKeys): Promise<number> {
  return client.zcard(keys.waitingChildren)
}

/** A job's state and outcome: what waitUntilFinished checks after it starts listening. */
export async function readOutcome(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
): Promise<{ state: string | undefined; returnValue: string | undefined; failedReason: string | undefined }> {
  const [state, returnValue, failedReason] = await client.hmget(keys.job(id), 'state', 'returnValue', 'failedReason')
  return { state: state ?? undefined, returnValue: returnValue ?? undefined, failedReason: failedReason ?? undefined }
}

/** A page of a job's log lines (LRANGE indices, negative from the end) and how many it holds. */
export async function readLogs(client: RedisClient, keys: QueueKeys, id: string, start: number, end: number): Promise<[string[], number]> {
  const [logs, count] = await Promise.all([client.lrange(keys.logs(id), start, end), client.llen(keys.logs(id))])
  return [logs, count]
}

/**
 * BullMQ's getRateLimitTtl(maxJobs?): ms left before the queue may start jobs again, by Redis's clock: the
 * longer of a rateLimit hold (worker.rateLimit, queue.rateLimit) and the worker limiters' window (the
 * window's key's PTTL, counted only when it holds at least maxJobs starts, when maxJobs is given). With no
 * limit: -2 (the PTTL of no key, BullMQ's answer), or 0 when maxJobs is given.
 */
export async function rateLimitTtl(client: RedisClient, keys: QueueKeys, asked?: number): Promise<number> {
  // Without maxJobs, the global rate limit's max when there is one (BullMQ's).
  const [[until, globalMax], window, starts, now] = await Promise.all([
    client.hmget(keys.meta, 'limitedUntil', 'max'),
    client.pttl(keys.limiter),
    client.zcard(keys.limiter),
    serverTimeMs(client),
  ])
  const maxJobs = asked ?? (globalMax == null ? undefined : Number(globalMax))
  const held = until === null ? 0 : Math.max(0, Number(until) - now)
  const windowLeft = window > 0 && (maxJobs === undefined || starts >= maxJobs) ? window : 0
  const left = Math.max(held, windowLeft)
  return left > 0 ? left : maxJobs === undefined ? -2 : 0
}

/** The queue's global limits as meta holds them (null: none). */
export async function globalLimits(client: RedisClient, keys: QueueKeys) {
  const [concurrency, max, duration] = await client.hmget(keys.meta, 'concurrency', 'max', 'duration')
  const num = (v: string | null | undefined) => (v == null ? null : Number(v))
  return { concurrency: num(concurrency), max: num(max), duration: num(duration) }
}

/** Sets the queue's global concurrency in meta: HSET's count, as BullMQ's. */
export function setGlobalConcurrency(client: RedisClient, keys: QueueKeys, concurrency: number): Promise<number> {
  return client.hset(keys.meta, 'concurrency', String(concurrency))
}

/** Sets the queue's global rate limit in meta (both fields at once): HSET's count, as BullMQ's. */
export function setGlobalRateLimit(client: RedisClient, keys: QueueKeys, max: number, duration: number): Promise<number> {
  return client.hset(keys.meta, 'max', String(max), 'duration', String(duration))
}

/** Removes the global concurrency (`concurrency`) or the global rate limit (`rateLimit`): HDEL's count, as BullMQ's. */
export function removeGlobalLimit(client: RedisClient, keys: QueueKeys, limit: 'concurrency' | 'rateLimit'): Promise<number> {
  return limit === 'concurrency' ? client.hdel(keys.meta, 'concurrency') : client.hdel(keys.meta, 'duration', 'max')
}

/** Claims the queue's stalled sweep for `ms` (BullMQ's stalled-check key): true for the one worker that won it. */
export async function claimStalledCheck(client: RedisClient, keys: QueueKeys, ms: number): Promise<boolean> {
  return (await client.set(keys.stalledCheck, '1', 'PX', ms, 'NX')) === 'OK'
}

/**
 * Records the queue's maxStalledCount in meta for the sweeps (a worker's, the reaper's), which read it there:
 * written only when not the default, so a queue that keeps the default stores nothing.
 */
export async function setMaxStalledCount(client: RedisClient, keys: QueueKeys, n: number, byDefault: number): Promise<void> {
  if (n === byDefault) await client.hdel(keys.meta, 'maxStalledCount')
  else await client.hset(keys.meta, 'maxStalledCount', String(n))
}

/** Whether the queue is paused. */
export async function isPaused(client: RedisClient, keys: QueueKeys): Promise<boolean> {
  return (await client.hexists(keys.meta, 'paused')) === 1
}

/** Records the queue's events stream cap (meta's maxLenEvents), which the scripts read. */
export async function setEventsMaxLen(client: RedisClient, keys: QueueKeys, maxLen: number): Promise<void> {
  await client.hset(keys.meta, 'maxLenEvents', String(maxLen))
}

/** A page of ids of the tail of `wait` (next first), of `reserved` or of a sorted set's head: what drain and obliterate read. */
export async function headIds(
  client: RedisClient,
  keys: QueueKeys,
  source: 'wait' | 'reserved' | 'waiting-children' | JobSet,
  n: number,
): Promise<string[]> {
  if (source === 'wait') return (await client.lrange(keys.wait, -n, -1)).reverse()
  return client.zrange(source === 'waiting-children' ? keys.waitingChildren : keys[source], '0', String(n - 1))
}

/** The queue's sorted sets of jobs. */
export type JobSet = 'active' | 'prioritized' | 'delayed' | 'completed' | 'failed'

/** A job's state field, or undefined when there is no such job. */
export async function jobState(client: RedisClient, keys: QueueKeys, id: string): Promise<JobState | undefined> {
  return ((await client.hget(keys.job(id), 'state')) ?? undefined) as JobState | undefined
}

/** A job's backoff type (its `backoff` field's first part), for the worker's settings.backoffStrategy; undefined for none. */
export async function readBackoffType(client: RedisClient, keys: QueueKeys, id: string): Promise<string | undefined> {
  const spec = await client.hget(keys.job(id), 'backoff')
  return spec ? spec.split(',')[0] : undefined
}

/** Records that a job stalled `n` times before (its stalledCounter): the demo's job that stalls once too often. */
export async function recordPastStalls(client: RedisClient, keys: QueueKeys, id: string, n: number): Promise<void> {
  await client.hset(keys.job(id), 'stalledCounter', String(n))
}

/** Adds `n` to the queue's job id counter (meta's `ids`); resolves to the last id reserved. */
export async function reserveJobIds(client: RedisClient, keys: QueueKeys, n: number): Promise<number> {
  return client.hincrby(keys.meta, 'ids', n)
}
