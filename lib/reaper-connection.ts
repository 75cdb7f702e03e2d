/**
 * Connection settings for the reaper, which must fail fast rather than wait out a Lambda timeout, and the
 * eviction-policy check it runs once per cold start.
 */
import type { RedisOptions } from 'ioredis'
import type { OpenOptions } from './connection.js'
import type { ReaperConfig } from './reaper-config.js'
import type { Log } from './reaper.js'
import type { RedisClient } from './connection.js'

export function connectReaper(config: ReaperConfig): OpenOptions {
  const redisOptions: RedisOptions = {
    lazyConnect: true,
    connectTimeout: config.redisTimeoutMs,
    commandTimeout: config.redisTimeoutMs,
    maxRetriesPerRequest: 1,
    // Give up reconnecting quickly: the next invocation opens a new connection.
    retryStrategy: (times) => (times > 2 ? null : 100 * times),
  }
  return { cluster: config.cluster, redisOptions }
}

/** An evicted lease looks like a dead worker, so anything but `noeviction` is worth a warning. */
export async function checkEvictionPolicy(client: RedisClient, log: Log): Promise<string | undefined> {
  try {
    const reply = (await client.call('CONFIG', 'GET', 'maxmemory-policy')) as string[]
    const policy = reply[1]
    if (policy !== undefined && policy !== 'noeviction') {
      log('warn', `Redis maxmemory-policy is ${policy}; EchoMQ needs noeviction (an evicted lease looks like a dead worker and its job is run again)`, { policy })
    }
    return policy
  } catch (err) {
    // Managed services (ElastiCache, MemoryDB, Upstash) often refuse CONFIG; check the parameter group instead.
    log('info', 'could not read maxmemory-policy (CONFIG refused); make sure it is noeviction', { error: (err as Error).message })
    return undefined
  }
}
