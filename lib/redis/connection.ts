/**
 * Turns the `connection` option into an ioredis client. It accepts an ioredis `Redis` or `Cluster`
 * (used as is and never closed by EchoMQ), or a URL: `redis://` or `rediss://` (TLS), with an optional
 * ACL user and password (`rediss://user:pass@host:6380/0`). With `cluster: true`, or a URL whose scheme is
 * `redis+cluster://` / `rediss+cluster://`, the URL names one seed node of a Redis Cluster
 * (several seeds may be given as `host1:port1,host2:port2`). Default: REDIS_URL, then redis://127.0.0.1:6379.
 * Passwords never appear in EchoMQ's messages (see redactUrl).
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis'
import { EchoMQError, NOT_REDIS } from '../errors.js'

export type RedisClient = Redis | Cluster

export const REDIS_URL_DEFAULT = 'redis://127.0.0.1:6379'

export interface OpenOptions {
  cluster?: boolean
  /** ioredis options for connections EchoMQ creates (timeouts, retry strategy); default: resilient(). */
  redisOptions?: RedisOptions
}

export interface Connection {
  client: RedisClient
  /** True when EchoMQ created the client and so must close it. */
  owned: boolean
}

const lastErrors = new WeakMap<object, Error>()

/** The last 'error' event of a client EchoMQ created (a TLS, DNS or auth failure that commands only see as retries). */
export function lastConnectionError(client: RedisClient): Error | undefined {
  return lastErrors.get(client)
}

/** The URL with its password masked. Credentials end at the last '@' (a password may hold '@' or '/'). */
export function redactUrl(url: string): string {
  const scheme = /^[a-z+]+:\/\//i.exec(url)?.[0] ?? ''
  const at = url.lastIndexOf('@')
  if (at < scheme.length) return url
  const auth = url.slice(scheme.length, at)
  const colon = auth.indexOf(':')
  return colon === -1 ? url : `${scheme}${auth.slice(0, colon)}:***${url.slice(at)}`
}

function isClient(value: unknown): value is RedisClient {
  return value instanceof Redis || value instanceof Cluster
}

export function resolveUrl(connection: unknown): string {
  if (connection === undefined) return process.env.REDIS_URL || REDIS_URL_DEFAULT
  if (typeof connection === 'string') return connection
  throw new EchoMQError('ERR_CONNECTION', 'expected connection to be an ioredis client or a redis:// or rediss:// URL')
}

interface ParsedUrl {
  tls: boolean
  cluster: boolean
  username: string | undefined
  password: string | undefined
  db: number
  nodes: { host: string; port: number }[]
}

export function parseRedisUrl(url: string): ParsedUrl {
  const scheme = /^(redis|rediss)(\+cluster)?:\/\//i.exec(url)
  if (!scheme?.[1]) {
    throw new EchoMQError(
      'ERR_CONNECTION',
      `expected a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL, got: ${JSON.stringify(redactUrl(url))}`,
    )
  }
  const rest = url.slice(scheme[0].length)
  const at = rest.lastIndexOf('@')
  const auth = at === -1 ? '' : rest.slice(0, at)
  const [hostPart = '', dbPart = ''] = rest.slice(at + 1).split('/')
  const colon = auth.indexOf(':')
  const decode = (s: string) => {
    if (s === '') return undefined
    try {
      return decodeURIComponent(s)
    } catch {
      return s // a literal '%' in a password
    }
  }
  const nodes = hostPart.split(',').map((hp) => {
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hp)
    if (!m?.[1]) throw new EchoMQError('ERR_CONNECTION', `bad host in Redis URL ${JSON.stringify(redactUrl(url))}`)
    const port = m[2] ? Number(m[2]) : 6379
    if (port < 1 || port > 65_535)
      throw new EchoMQError('ERR_CONNECTION', `port ${port} in Redis URL ${JSON.stringify(redactUrl(url))} is outside 1-65535`)
    return { host: m[1].replace(/^\[|\]$/g, ''), port }
  })
  const db = dbPart.split('?')[0] ?? ''
  if (db !== '' && !/^\d+$/.test(db))
    throw new EchoMQError('ERR_CONNECTION', `bad database number in Redis URL ${JSON.stringify(redactUrl(url))}`)
  return {
    tls: scheme[1].toLowerCase() === 'rediss',
    cluster: Boolean(scheme[2]),
    username: colon === -1 ? decode(auth) : decode(auth.slice(0, colon)),
    password: colon === -1 ? undefined : decode(auth.slice(colon + 1)),
    db: db === '' ? 0 : Number(db),
    nodes,
  }
}

/** Validates without connecting: used before any Redis call so bad input changes nothing. */
export function checkConnection(connection: unknown): void {
  if (isClient(connection)) return
  parseRedisUrl(resolveUrl(connection))
}

export function openConnection(connection: unknown, options: OpenOptions = {}): Connection {
  if (isClient(connection)) return { client: connection, owned: false }
  const url = resolveUrl(connection)
  const parsed = parseRedisUrl(url)
  // replyMapping left out: ioredis's constructors type it without undefined (exactOptionalPropertyTypes).
  const common: Omit<RedisOptions, 'replyMapping'> = {
    ...(options.redisOptions ?? resilient()),
    ...(parsed.username ? { username: parsed.username } : {}),
    ...(parsed.password ? { password: parsed.password } : {}),
    ...(parsed.tls ? { tls: { ...(options.redisOptions?.tls ?? {}) } } : {}),
  }
  const node = parsed.nodes[0]
  if (!(parsed.cluster || options.cluster) && (!node || parsed.nodes.length > 1)) {
    throw new EchoMQError('ERR_CONNECTION', `a non-cluster Redis URL names one host, got: ${JSON.stringify(redactUrl(url))}`)
  }
  const client: RedisClient =
    parsed.cluster || options.cluster
      ? // The node options, as given: ioredis's Cluster type leaves out a few that it sets per node itself.
        new Cluster(parsed.nodes, { redisOptions: common } as ConstructorParameters<typeof Cluster>[1])
      : new Redis({ ...common, host: node?.host ?? '127.0.0.1', port: node?.port ?? 6379, db: parsed.db })
  // Failures reach callers as rejected commands; without a listener ioredis also prints each one.
  client.on('error', (err: Error) => {
    // A server that is not Redis answers, then drops the line: keep the answer, which names the cause.
    if (!NOT_REDIS.test(lastErrors.get(client)?.message ?? '')) lastErrors.set(client, err)
    // ioredis reports a refused SELECT (a database the server does not have) as an error event and goes
    // on in database 0. This comes before the connection is ready, so closing here means no command
    // runs in the wrong database: each one fails, naming this error.
    if (/DB index is out of range|invalid DB index/i.test(err.message)) client.disconnect()
  })
  client.on('ready', () => void lastErrors.delete(client))
  return { client, owned: true }
}

/**
 * ioredis settings for a client that must fail fast rather than wait (the sweep, the reaper, the
 * command): connecting and every command are bounded by `timeoutMs`, a command is tried at most twice,
 * and reconnecting gives up after a few tries (the next call or invocation opens a new connection).
 */
export function failFast(timeoutMs: number): RedisOptions {
  return {
    disconnectTimeout: DISCONNECT_TIMEOUT_MS,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => (times > 2 ? null : 100 * times),
  }
}

/** How long a closed socket may wait for the server's goodbye (a stalled server never sends it): ioredis
 * keeps the process alive for it, 2 s by default. */
const DISCONNECT_TIMEOUT_MS = 250
/** How long a long-lived connection (a Queue's, a Worker's) waits to connect, and between reconnects at most. */
const CONNECT_TIMEOUT_MS = 5_000
const RECONNECT_MAX_DELAY_MS = 2_000
/** Reconnects a command waits through before it fails: with the delays below, about 1.5 s when Redis
 * refuses connections, up to about 20 s when it does not answer them. */
const RECONNECTS_PER_COMMAND = 3

/**
 * ioredis settings for a connection that lives as long as a Queue or a Worker: it reconnects for ever
 * (100 ms doubling to 2 s, with jitter), but a command does not wait for ever while Redis is unreachable:
 * it fails with the connection's last error after a few reconnects (ioredis's own default waits about
 * 70 s), or after `commandTimeoutMs` when given (a Redis that accepts connections but never answers).
 * The Worker gives none: its blocking reads wait a minute, and its other calls are bounded by its leases.
 */
export function resilient(reconnectsPerCommand = RECONNECTS_PER_COMMAND, commandTimeoutMs?: number): RedisOptions {
  return {
    ...(commandTimeoutMs === undefined ? {} : { commandTimeout: commandTimeoutMs }),
    disconnectTimeout: DISCONNECT_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: reconnectsPerCommand,
    retryStrategy: (times) => Math.min(100 * 2 ** (times - 1), RECONNECT_MAX_DELAY_MS) + Math.floor(Math.random() * 100),
  }
}

/** How long QUIT may wait for the replies before it (a stalled link) before the socket is just closed. */
const QUIT_TIMEOUT_MS = 2_000

export async function closeConnection(conn: Connection): Promise<void> {
  if (!conn.owned) return
  // QUIT on a connection that is not up would wait for a reconnect that may never come.
  if (conn.client.status !== 'ready') return conn.client.disconnect()
  let timer: NodeJS.Timeout | undefined
  try {
    const stalled = new Promise<'stalled'>((resolve) => {
      timer = setTimeout(() => resolve('stalled'), QUIT_TIMEOUT_MS)
    })
    if ((await Promise.race([conn.client.quit(), stalled])) === 'stalled') conn.client.disconnect()
  } catch {
    conn.client.disconnect()
  } finally {
    clearTimeout(timer)
  }
}

/** A second connection with the same settings, for blocking commands. */
export function duplicateClient(client: RedisClient): RedisClient {
  return client instanceof Cluster ? client.duplicate() : client.duplicate()
}
