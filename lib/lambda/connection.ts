/**
 * The worker function's Redis connection, kept across warm invocations of a container: opened on the
 * first, with lazyConnect (its Worker's blocking connection, a duplicate, then connects only if used),
 * and reconnected by ioredis after a drop (a freeze long enough for the server to close it). Where the
 * URL comes from is the reaper's rule (lib/redis/url.ts): the `connection` option, else REDIS_URL, else
 * the SSM SecureString REDIS_URL_PARAMETER names, read at run time through the reaper's reader (the AWS
 * packages are optional peers, loaded only then).
 */
import { EchoMQError, withoutSecrets } from '../errors.js'
import { SSM_PEER_DEPENDENCIES, withPeers } from '../reaper/peers.js'
import { type Connection, openConnection, type RedisClient, redactUrl, resilient } from '../redis/connection.js'
import { redisUrlSource } from '../redis/url.js'

/** As a Worker's: calls wait through reconnects (about 30 s of refusals) rather than fail a finish. */
const RECONNECTS_PER_CALL = 20

type Env = Record<string, string | undefined>

export class WorkerConnection {
  private conn: Connection | undefined
  /** What to name in errors: the URL, masked, or the parameter. */
  where = 'Redis'

  constructor(
    private readonly connection: unknown,
    private readonly env: Env = process.env,
  ) {}

  async client(): Promise<RedisClient> {
    if (this.conn && this.conn.client.status !== 'end') return this.conn.client
    if (typeof this.connection === 'string') this.where = `Redis at ${redactUrl(this.connection)}`
    const given = this.connection ?? (await this.urlFromEnv())
    this.conn = openConnection(given, { redisOptions: { ...resilient(RECONNECTS_PER_CALL), lazyConnect: true } })
    // Reported per call, as each invocation's failure; ioredis would also print every reconnect failure.
    this.conn.client.on('error', () => undefined)
    return this.conn.client
  }

  /** Drops the connection after a failure; the next invocation opens a new one (reading the URL again). */
  discard(): void {
    this.conn?.client.disconnect()
    this.conn = undefined
  }

  async close(): Promise<void> {
    const conn = this.conn
    this.conn = undefined
    if (conn?.owned) await conn.client.quit().catch(() => conn.client.disconnect())
  }

  private async urlFromEnv(): Promise<string> {
    const source = redisUrlSource(undefined, this.env)
    if ('value' in source) {
      this.where = `Redis at ${redactUrl(source.value)}`
      return source.value
    }
    const { secretReader } = await withPeers(
      'echomq/lambda (REDIS_URL_PARAMETER)',
      () => import('../reaper/secrets.js'),
      SSM_PEER_DEPENDENCIES,
    )
    try {
      const url = await secretReader()(source.parameter, { forceFetch: true })
      this.where = `Redis at ${redactUrl(url)}`
      return url
    } catch (err) {
      throw err instanceof EchoMQError
        ? err
        : new EchoMQError('ERR_CONFIG', `SSM parameter ${source.parameter} could not be read`, { cause: withoutSecrets(err) })
    }
  }
}
