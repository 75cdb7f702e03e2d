/**
 * The reaper's Redis connection, kept across runs (a Lambda container's warm invocations, the ticks of
 * `echomq sweep --every`). `client()` opens it when needed, pings it (a Redis that does not answer fails
 * the run within the configured timeout, naming the URL with its password masked) and, once (per cold
 * start, in a Lambda), checks the eviction policy. A run that failed calls `discard()`, so the next one opens a
 * fresh connection rather than reusing a broken one.
 */

import { EchoMQError, withLastError, withoutSecrets } from '../errors.js'
import {
  type Connection,
  closeConnection,
  failFast,
  lastConnectionError,
  openConnection,
  type RedisClient,
  redactUrl,
} from '../redis/connection.js'
import { evictionPolicy } from '../redis/queries.js'
import type { ReaperConfig } from './config.js'

export type Log = (level: 'info' | 'warn' | 'error', message: string, fields?: object) => void

export class ReaperConnection {
  private conn: Connection | undefined
  private evictionChecked = false

  constructor(
    private readonly config: ReaperConfig,
    private readonly log: Log,
  ) {}

  /** A connected client, answering within the timeout. */
  async client(): Promise<RedisClient> {
    // A warm connection is used as it is: its first command, bounded by the same timeout, is the check
    // (on per-command pricing, a ping a minute would be a fifth of an idle queue's bill).
    if (this.conn?.client.status === 'ready') return this.conn.client
    if (!this.conn || this.conn.client.status === 'end') {
      this.conn = openConnection(this.config.redisUrl, {
        cluster: this.config.cluster,
        redisOptions: { lazyConnect: true, ...failFast(this.config.redisTimeoutMs) },
      })
    }
    const { client } = this.conn
    await this.ping(client)
    if (!this.evictionChecked) {
      this.evictionChecked = true
      await checkEvictionPolicy(client, this.log)
    }
    return client
  }

  /** A connection failure of a run, with the URL (password masked) that could not be reached. */
  unreachable(err: unknown): unknown {
    if (!(err instanceof EchoMQError) || err.code !== 'ERR_CONNECTION' || err.message.startsWith('Redis at ')) return err
    return new EchoMQError('ERR_CONNECTION', `Redis at ${redactUrl(this.config.redisUrl)} is unreachable: ${err.message}`, { cause: err })
  }

  /** Drops the connection after a failure; the next run opens a new one. */
  discard(): void {
    this.conn?.client.disconnect()
    this.conn = undefined
  }

  async close(): Promise<void> {
    if (this.conn) await closeConnection(this.conn)
    this.conn = undefined
  }

  private async ping(client: RedisClient): Promise<void> {
    const { redisTimeoutMs, redisUrl } = this.config
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${redisTimeoutMs} ms`)), redisTimeoutMs)
    })
    try {
      await Promise.race([client.ping(), timeout])
    } catch (err) {
      const message = withLastError((err as Error).message, lastConnectionError(client))
      throw new EchoMQError('ERR_CONNECTION', `Redis at ${redactUrl(redisUrl)} is unreachable: ${message}`, { cause: withoutSecrets(err) })
    } finally {
      clearTimeout(timer)
    }
  }
}

/** An evicted lease looks like a dead worker, so anything but `noeviction` is worth a warning. */
export async function checkEvictionPolicy(client: RedisClient, log: Log): Promise<string | undefined> {
  try {
    const policy = await evictionPolicy(client)
    if (policy !== undefined && policy !== 'noeviction') {
      log(
        'warn',
        `Redis maxmemory-policy is ${policy}; EchoMQ needs noeviction (an evicted lease looks like a dead worker and its job is run again)`,
        { policy },
      )
    }
    return policy
  } catch (err) {
    // Managed services (ElastiCache, MemoryDB, Upstash) often refuse CONFIG; check the parameter group instead.
    log('info', 'could not read maxmemory-policy (CONFIG refused); make sure it is noeviction', { error: (err as Error).message })
    return undefined
  }
}
