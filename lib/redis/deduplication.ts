/**
 * The reads and deletes of deduplication holds (see lib/deduplication.ts and lua/includes/deduplicate.lua):
 * an id held without a ttl is meta's field `de:<id>`, one held with a ttl the key <prefix>:{q}:de:<id>.
 */
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'

/**
 * Who holds each deduplication id, as stored (meta's field without a ttl, the key with one): the script
 * checks the holder is still alive, and the reply of a call that found it changed is read again.
 */
export async function readHolders(client: RedisClient, keys: QueueKeys, ids: string[]): Promise<(string | null)[]> {
  if (ids.length === 0) return []
  const [inMeta, withTtl] = await Promise.all([
    client.hmget(keys.meta, ...ids.map((id) => `de:${id}`)),
    client.mget(...ids.map((id) => keys.deduplication(id))),
  ])
  return ids.map((_, i) => inMeta[i] ?? withTtl[i] ?? null)
}

/**
 * The id of the job that holds `id` now, or null: a holder whose job is gone, or finished for an id held
 * without a ttl, holds nothing (its entry is taken over by the next add).
 */
export async function holderOf(client: RedisClient, keys: QueueKeys, id: string): Promise<string | null> {
  const [inMeta, withTtl] = await Promise.all([client.hget(keys.meta, `de:${id}`), client.get(keys.deduplication(id))])
  const holder = inMeta ?? withTtl
  if (holder === null) return null
  const state = await client.hget(keys.job(holder), 'state')
  if (state === null || (inMeta !== null && (state === 'completed' || state === 'failed'))) return null
  return holder
}

/** Deletes the hold on `id` (BullMQ's removeDeduplicationKey): resolves to 1 when there was one, else 0. */
export async function removeHold(client: RedisClient, keys: QueueKeys, id: string): Promise<number> {
  const [fromMeta, key] = await Promise.all([client.hdel(keys.meta, `de:${id}`), client.del(keys.deduplication(id))])
  return fromMeta + key > 0 ? 1 : 0
}
