/**
 * What waits: the events stream a QueueEvents reads (XREAD BLOCK), and the marker an idle worker blocks on.
 */
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'

/** The id of the stream's newest entry, '0-0' when it has none: where a new listener starts reading. */
export async function lastEventId(client: RedisClient, keys: QueueKeys): Promise<string> {
  const [last] = await client.xrevrange(keys.events, '+', '-', 'COUNT', 1)
  return last?.[0] ?? '0-0'
}

/** Entries after `fromId`, waiting up to `blockMs` for one (XREAD BLOCK); [] when none came. */
export async function readEvents(
  blocking: RedisClient,
  keys: QueueKeys,
  fromId: string,
  blockMs: number,
  count: number,
): Promise<[id: string, fields: string[]][]> {
  const reply = await blocking.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', keys.events, fromId)
  return reply?.[0]?.[1] ?? []
}

/** Blocks on the marker (BZPOPMIN) for up to `timeoutS`: the member popped ('0' work, 'd' a due time), or null. */
export async function waitForWork(blocking: RedisClient, keys: QueueKeys, timeoutS: number): Promise<string | null> {
  const popped = await blocking.bzpopmin(keys.marker, timeoutS)
  return popped === null ? null : (popped[1] ?? null)
}

/** Leaves a due time in the marker for another idle worker (ZADD LT: an earlier one stays). */
export async function handBackDue(client: RedisClient, keys: QueueKeys, dueAt: number): Promise<void> {
  await client.zadd(keys.marker, 'LT', String(dueAt), 'd')
}

/** Puts a popped wake-up back for the other idle workers (a paused worker's). */
export async function rearmMarker(client: RedisClient, keys: QueueKeys): Promise<void> {
  await client.zadd(keys.marker, 0, '0')
}
