/**
 * The queue registry: every Queue and Worker adds its queue's name to `<prefix>:queues`, so the reaper
 * sweeps a new queue without being redeployed. Registering is best effort: a failure never fails the
 * call that triggered it, and it is tried again later.
 */

import type { RedisClient } from './connection.js'
import { registryKey } from './keys.js'

/** Don't retry a failed registration more often than this (a broken registry key must not cost every call). */
const RETRY_AFTER_MS = 10_000

export async function registerQueue(client: RedisClient, prefix: string, queue: string): Promise<void> {
  await client.sadd(registryKey(prefix), queue)
}

export async function registeredQueues(client: RedisClient, prefix: string): Promise<string[]> {
  return (await client.smembers(registryKey(prefix))).sort()
}

/**
 * Returns `ensure()`: registers the queue until it has worked once. Resolves with the error of an attempt
 * that failed (for the caller to report), undefined otherwise; never rejects.
 */
export function registration(client: RedisClient, prefix: string, queue: string, now = () => Date.now()): () => Promise<unknown> {
  let done = false
  let lastTry = -Infinity
  return async () => {
    if (done || now() - lastTry < RETRY_AFTER_MS) return undefined
    lastTry = now()
    try {
      await registerQueue(client, prefix, queue)
      done = true
      return undefined
    } catch (err) {
      return err
    }
  }
}
