/**
 * Promotion of due delayed jobs, schedulers' iterations included: a plain job moves to `wait` in batches
 * (lua/promote-7.lua); a scheduler's iteration moves with its next iteration made in the same script
 * (lua/iterate-11.lua), its due time computed here from the scheduler's timing and Redis's clock. Both
 * the worker's promoter and the sweep call this, so a schedule advances whoever promotes; an operator's
 * early promotion (queue.promoteJob) advances it the same way.
 */
import { iterate, type Promoted, promote } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { readScheduler, serverTimeMs } from '../redis/queries.js'
import { successorDue, timingFromHash } from './timing.js'

/** A scheduler's iteration id, `repeat:<scheduler id>:<due ms>`: its parts, or undefined for a plain job. */
export function parseIteration(id: string): { schedulerId: string; due: number } | undefined {
  if (!id.startsWith('repeat:')) return undefined
  const at = id.lastIndexOf(':')
  const due = Number(id.slice(at + 1))
  return at > 7 && Number.isSafeInteger(due) ? { schedulerId: id.slice(7, at), due } : undefined
}

/**
 * Moves the due jobs among `ids` (the earliest in `delayed`) into line; `rearm` leaves the next due time in
 * the marker for an idle worker. Resolves to the ids promoted and when the next delayed job is due.
 */
export async function promoteDue(client: RedisClient, keys: QueueKeys, ids: string[], rearm: boolean): Promise<Promoted> {
  const plain: string[] = []
  const iterations: { id: string; schedulerId: string; due: number }[] = []
  for (const id of ids) {
    const it = parseIteration(id)
    if (it) iterations.push({ id, ...it })
    else plain.push(id)
  }
  const promoted: string[] = []
  if (iterations.length > 0) {
    const now = await serverTimeMs(client)
    for (const it of iterations) {
      if (it.due <= now && (await advance(client, keys, it, now, false))) promoted.push(it.id)
    }
  }
  // Last, so its answer (the next due time) counts the iterations just made.
  const rest = await promote(client, keys, plain, rearm)
  return { ...rest, promoted: [...promoted, ...rest.promoted] }
}

/**
 * Promotes a scheduler's pending iteration now, due or not (queue.promoteJob), making the next one as its
 * due promotion would: the schedule keeps its rhythm. Resolves to false when `id` is not in `delayed`.
 */
export async function promoteIterationNow(client: RedisClient, keys: QueueKeys, id: string): Promise<boolean> {
  const it = parseIteration(id)
  if (!it) return false
  return advance(client, keys, it, await serverTimeMs(client), true)
}

async function advance(client: RedisClient, keys: QueueKeys, it: { schedulerId: string; due: number }, now: number, early: boolean) {
  const scheduler = await readScheduler(client, keys, it.schedulerId)
  // The next one only from the iteration the scheduler points at (an upsert may have moved it on).
  const next =
    scheduler && scheduler.due === it.due
      ? successorDue(timingFromHash(scheduler.hash), it.due, now, Number(scheduler.hash.ic ?? 0))
      : undefined
  return iterate(client, keys, it.schedulerId, it.due, next, early)
}
