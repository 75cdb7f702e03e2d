/**
 * The encoding, reads and deletes of deduplication holds (see lib/deduplication.ts and lua/includes/deduplicate.lua):
 * an id held without a ttl is meta's field `de:<id>`, one held with a ttl the key <prefix>:{q}:de:<id>.
 */
import type { DeduplicationOptions } from '../deduplication.js'
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'

/**
 * The script's form of the option with the holder the call expects: "<ttl>,<extend><delayed><holder's
 * length in bytes>,<holder><id>", extend 0 or 1, or 2 for keepLastIfActive (sent with a ttl of 0: its hold
 * has none, BullMQ's rule), delayed what becomes of a holder still delayed: 0 kept, 1
 * replaced (`replace`), 2 rescheduled (`reschedule`, ignored with `replace`, as BullMQ ignores it). Both ids
 * may hold any character, commas too: the length says where the holder ends (in bytes, as Lua's
 * string.sub counts).
 */
export function encodeDeduplication(d: DeduplicationOptions, holder: string | null): string {
  const h = holder ?? ''
  const delayed = d.replace ? 1 : d.reschedule ? 2 : 0
  const [ttl, extend] = d.keepLastIfActive ? [0, 2] : [d.ttl ?? 0, d.extend ? 1 : 0]
  return `${ttl},${extend}${delayed}${Buffer.byteLength(h)},${h}${d.id}`
}

/**
 * The id of the job that holds `id` now, or null: a hold with a ttl lasts its ttl; one without, while its
 * job exists and has not finished (a stale entry is taken over by the next add).
 */
export async function holderOf(client: RedisClient, keys: QueueKeys, id: string): Promise<string | null> {
  const [inMeta, withTtl] = await Promise.all([client.hget(keys.meta, `de:${id}`), client.get(keys.deduplication(id))])
  if (inMeta === null) return withTtl
  const state = await client.hget(keys.job(inMeta), 'state')
  return state === null || state === 'completed' || state === 'failed' ? null : inMeta
}

/** Deletes the hold on `id` (BullMQ's removeDeduplicationKey): resolves to 1 when there was one, else 0. */
export async function removeHold(client: RedisClient, keys: QueueKeys, id: string): Promise<number> {
  const [fromMeta, key] = await Promise.all([client.hdel(keys.meta, `de:${id}`), client.del(keys.deduplication(id))])
  return fromMeta + key > 0 ? 1 : 0
}
