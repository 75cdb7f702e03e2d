/**
 * The reaper's Redis connection, kept across runs (a Lambda container's warm invocations, the ticks of
 * `echomq sweep --every`). `client()` opens it when needed, pings it (a Redis that does not answer fails
 * the run within the configured timeout, plus DIAGNOSIS_TIMEOUT_MS to say why, with ERR_CONNECTION naming
 * the URL with its password masked and, with a `hint`, what to fix: a certificate refused, TLS on a plain
 * port or the reverse, a filtered port (lib/redis/diagnosis.ts); one that refuses the credentials,
 * WRONGPASS or NOAUTH, fails with ERR_AUTH) and, once (per cold start, in a Lambda), checks the eviction
 * policy. A run that failed calls `discard()`, so the next one opens a fresh
 * connection rather than reusing a broken one.
 *
 * No ready check: ioredis would send INFO on each connection, and print a line that is not JSON when the
 * user may not run it. The ping does the check, so the reaper's Redis user needs no INFO (README, step 1).
 */

import { EchoMQError, withLastError, withoutSecrets } from '../errors.js'
import {
  type Connection,
  closeConnection,
  explainFailure,
  failFast,
  lastConnectionError,
  openConnection,
  type RedisClient,
  redactUrl,
} from '../redis/connection.js'
import { ConnectionProblem } from '../redis/diagnosis.js'
import { evictionPolicy } from '../redis/queries.js'
import type { ReaperConfig } from './config.js'
import type { Log } from './log.js'

/** Redis's replies to credentials it refuses. */
const REFUSED_CREDENTIALS = /WRONGPASS|NOAUTH|invalid username-password/i
const AUTH_HINT =
  'check the user and password in the Redis URL (REDIS_URL, or the SSM parameter REDIS_URL_PARAMETER names): ' +
  'a rotated password is read again at the next invocation; the user must exist and be on (ACL SETUSER <user> on)'

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
        redisOptions: { lazyConnect: true, enableReadyCheck: false, ...failFast(this.config.redisTimeoutMs) },
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
    if (REFUSED_CREDENTIALS.test(err.message)) return this.refused(err.message, err)
    return new EchoMQError('ERR_CONNECTION', `Redis at ${redactUrl(this.config.redisUrl)} is unreachable: ${err.message}`, { cause: err })
  }

  private refused(message: string, cause: unknown): EchoMQError {
    return new EchoMQError('ERR_AUTH', `Redis at ${redactUrl(this.config.redisUrl)} refused the credentials: ${message}`, {
      cause: withoutSecrets(cause),
      hint: AUTH_HINT,
    })
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
      const failure = err as Error
      // Refused credentials need no diagnosis: the server answered.
      const refused = REFUSED_CREDENTIALS.test(withLastError(failure.message, lastConnectionError(client)))
      const last = refused ? lastConnectionError(client) : await explainFailure(client, failure)
      const message = withLastError(failure.message, last)
      if (REFUSED_CREDENTIALS.test(message)) throw this.refused(message, err)
      throw new EchoMQError('ERR_CONNECTION', `Redis at ${redactUrl(redisUrl)} is unreachable: ${message}`, {
        cause: withoutSecrets(err),
        ...(last instanceof ConnectionProblem ? { hint: last.hint } : {}),
      })
    } finally {
      clearTimeout(timer)
    }
  }
}

/** An evicted lease looks like a dead worker, so anything but `noeviction` is worth a warning. */
async function checkEvictionPolicy(client: RedisClient, log: Log): Promise<string | undefined> {
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
