/**
 * Promotion of due delayed jobs, schedulers' iterations included: a plain job moves to `wait` in batches
 * (lua/promote-7.lua); a scheduler's iteration moves with its next iteration made in the same script
 * (lua/iterate-11.lua), its due time computed here from the scheduler's timing and Redis's clock. Both
 * the worker's promoter and the sweep call this, so a schedule advances whoever promotes.
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
      if (it.due > now) continue
      const scheduler = await readScheduler(client, keys, it.schedulerId)
      // The next one only from the iteration the scheduler points at (an upsert may have moved it on).
      const next =
        scheduler && scheduler.due === it.due
          ? successorDue(timingFromHash(scheduler.hash), it.due, now, Number(scheduler.hash.ic ?? 0))
          : undefined
      if (await iterate(client, keys, it.schedulerId, it.due, next)) promoted.push(it.id)
    }
  }
  // Last, so its answer (the next due time) counts the iterations just made.
  const rest = await promote(client, keys, plain, rearm)
  return { ...rest, promoted: [...promoted, ...rest.promoted] }
}
