/**
 * The registry of queues and the reaper's discovery: SCAN over every primary node, the discovery mark.
 */
import { Cluster } from 'ioredis'
import type { RedisClient } from './connection.js'
import { deduplicationPattern, discoveryKey, prefixPattern, type QueueKeys, registryKey, sweptKeyPattern } from './keys.js'

export async function addToRegistry(client: RedisClient, prefix: string, queue: string): Promise<void> {
  await client.sadd(registryKey(prefix), queue)
}

export async function registryMembers(client: RedisClient, prefix: string): Promise<string[]> {
  return (await client.smembers(registryKey(prefix))).sort()
}

/** Which of `queues` are in the registry, in order. */
export async function inRegistry(client: RedisClient, prefix: string, queues: string[]): Promise<boolean[]> {
  return ((await client.smismember(registryKey(prefix), ...queues)) as number[]).map((m) => m === 1)
}

/** Removes the registry entry of a queue that was obliterated. */
export async function dropFromRegistry(client: RedisClient, prefix: string, queue: string): Promise<void> {
  await client.srem(registryKey(prefix), queue)
}

/** The masters to SCAN: every master of a cluster, or the one server. */
export const scanNodes = (client: RedisClient): RedisClient[] => (client instanceof Cluster ? client.nodes('master') : [client])

/** One SCAN page of `node` for keys matching `pattern` of `type`: the next cursor ('0' at the end) and the keys. */
export async function scanPage(
  node: RedisClient,
  cursor: string,
  pattern: string,
  type: string,
  count: number,
): Promise<[string, string[]]> {
  return node.scan(cursor, 'MATCH', pattern, 'COUNT', count, 'TYPE', type)
}

/** One SCAN page for the keys that say a queue needs the reaper (every type: `wait` is a list, the rest sorted sets). */
export function scanSweptKeys(node: RedisClient, prefix: string, cursor: string, count: number): Promise<[string, string[]]> {
  return node.scan(cursor, 'MATCH', sweptKeyPattern(prefix), 'COUNT', count)
}

/** ms until the discovery mark expires (0 when there is none): how long until a pass is due. */
export async function discoveryDueInMs(client: RedisClient, prefix: string): Promise<number> {
  return Math.max(0, await client.pttl(discoveryKey(prefix)))
}

/** Records a finished discovery pass for `ms`. */
export async function markDiscovered(client: RedisClient, prefix: string, ms: number): Promise<void> {
  await client.set(discoveryKey(prefix), '1', 'PX', ms)
}

/**
 * Deletes the deduplication ids a queue holds with a ttl (its obliterate): keys named by what the user chose,
 * so no script can list them. The queue's keys share one slot: one node of a cluster holds them all.
 */
export async function deleteDeduplicationHolds(client: RedisClient, keys: QueueKeys): Promise<void> {
  await eachScanPage(client, deduplicationPattern(keys), async (node, found) => {
    if (found.length > 0) await node.unlink(...found)
  })
}

/**
 * Deletes every key under `prefix` (the demo's and the tests' clean-up; never a queue in use): a cluster
 * node by node, one key at a time there (keys of different queues live in different slots).
 */
export async function deleteUnderPrefix(client: RedisClient, prefix: string): Promise<void> {
  await eachScanPage(client, prefixPattern(prefix), async (_node, keys) => {
    if (client instanceof Cluster) await Promise.all(keys.map((k) => client.del(k)))
    else if (keys.length > 0) await client.del(...keys)
  })
}

/** Calls `page` with each SCAN page of keys matching `pattern`, master by master, one page at a time. */
async function eachScanPage(
  client: RedisClient,
  pattern: string,
  page: (node: RedisClient, keys: string[]) => Promise<void>,
): Promise<void> {
  for (const node of scanNodes(client)) {
    let cursor = '0'
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
      cursor = next
      await page(node, keys)
    } while (cursor !== '0')
  }
}
