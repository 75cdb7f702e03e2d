/**
 * The queue registry: every Queue and Worker adds its queue's name to `<prefix>:queues`, so the reaper
 * sweeps a new queue without being redeployed.
 */
import { registryKey } from './keys.js'
import type { RedisClient } from './scripts.js'

export async function registerQueue(client: RedisClient, prefix: string, queue: string): Promise<void> {
  await client.sadd(registryKey(prefix), queue)
}

export async function registeredQueues(client: RedisClient, prefix: string): Promise<string[]> {
  return (await client.smembers(registryKey(prefix))).sort()
}
