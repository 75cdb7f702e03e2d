/**
 * Turns the `connection` option into an ioredis client. It accepts an ioredis `Redis` or `Cluster`
 * (used as is and never closed by EchoMQ), ioredis options (`{ host, port, password, tls, db, ... }`,
 * checked in connection-options.ts), or a URL: `redis://` or `rediss://` (TLS), with an optional
 * ACL user and password (`rediss://user:pass@host:6380/0`). With `cluster: true`, or a URL whose scheme is
 * `redis+cluster://` / `rediss+cluster://`, the URL names one seed node of a Redis Cluster
 * (several seeds may be given as `host1:port1,host2:port2`). Default: redis://127.0.0.1:6379, as BullMQ's.
 * Anything else is refused with ERR_OPTIONS (a configuration mistake, not a connection failure).
 * Passwords never appear in EchoMQ's messages (see redactUrl).
 *
 * A cluster is reached by the names it is given and announces, never by addresses resolved first: a
 * managed Redis over TLS (ElastiCache serverless, cluster mode with in-transit encryption) has a
 * certificate for host names, which an address does not match. A client EchoMQ opens keeps its last
 * connection error, explained (diagnosis.ts: the TLS error behind "Failed to refresh slots cache", a
 * rediss:// URL on a plain port, a filtered port), for the messages of the calls that fail.
 */
import { Cluster, type ClusterOptions, type Command, Redis, type RedisOptions } from 'ioredis'
import { EchoMQError, NOT_REDIS } from '../errors.js'
import {
  CONNECTION_FORMS,
  type ConnectionObject,
  checkConnectionObject,
  describeConnectionObject,
  isPlainObject,
} from './connection-options.js'
import { type ConnectionProblem, diagnose, type Endpoint, explain } from './diagnosis.js'

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
  /** Where a client EchoMQ opened goes, password masked (`Redis at redis://user:***@host:6379`), for its errors. */
  where?: string
}

const lastErrors = new WeakMap<object, Error>()
/** What a client EchoMQ opened reaches first (a cluster's first seed), for diagnosis. */
const endpoints = new WeakMap<object, Endpoint>()
/** A failure explained, until the client is ready again, and the diagnosis under way. */
const problems = new WeakMap<object, ConnectionProblem>()
const diagnoses = new WeakMap<object, Promise<void>>()
/** A connection not up by then is diagnosed (a local or same-region Redis is up in milliseconds). */
const SLOW_CONNECT_MS = 1_000
const NO_CONNECTION_YET = 'no connection yet'

/**
 * The last connection error of a client EchoMQ created (a TLS, DNS or auth failure that commands only see
 * as retries), explained when a diagnosis could tell what to fix.
 */
export function lastConnectionError(client: RedisClient): Error | undefined {
  return problems.get(client) ?? lastErrors.get(client)
}

/**
 * The connection error that explains `failure` (a call that failed or did not answer), after a diagnosis
 * (bounded by DIAGNOSIS_TIMEOUT_MS) when none has run yet: for a caller that reports once and exits.
 */
export async function explainFailure(client: RedisClient, failure: Error): Promise<Error | undefined> {
  if (!problems.has(client)) startDiagnosis(client, lastErrors.get(client) ?? failure)
  await diagnoses.get(client)
  return lastConnectionError(client)
}

/** A reply from the server (WRONGPASS, a database it does not have): the link itself works. */
const isReply = (err: Error) => err.name === 'ReplyError'

function startDiagnosis(client: RedisClient, err: Error): void {
  const endpoint = endpoints.get(client)
  if (!endpoint || diagnoses.has(client) || isReply(err)) return
  const running = diagnose(endpoint, err).then((problem) => {
    if (!problem || client.status === 'ready') return
    problems.set(client, problem)
    // A TLS client on a plain port, or a filtered one, has no error of its own until connectTimeout: the
    // owner's listeners (a Worker's, a Queue's) hear the cause now.
    if (err.message === NO_CONNECTION_YET) client.emit('error', problem)
  })
  diagnoses.set(client, running)
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

function badConnection(message: string, variable = 'connection'): never {
  throw new EchoMQError('ERR_OPTIONS', message, { variable })
}

/**
 * Where a connection points, as a URL (an options object's without its password; mask a URL's with
 * redactUrl before showing it). Refuses what is not a connection.
 */
export function resolveUrl(connection: unknown): string {
  // The library reads no environment (the reaper, the worker handler and the command do): BullMQ's default.
  if (connection === undefined) return REDIS_URL_DEFAULT
  if (typeof connection === 'string') return connection
  if (isPlainObject(connection)) return describeConnectionObject(connection)
  return badConnection(`expected connection to be ${CONNECTION_FORMS}, got: ${describeValue(connection)}`)
}

function describeValue(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return `an instance of ${value.constructor?.name ?? 'an unknown class'}`
  return typeof value === 'function' ? 'a function' : `${typeof value} ${String(value)}`
}

interface ParsedUrl {
  tls: boolean
  cluster: boolean
  username: string | undefined
  password: string | undefined
  db: number
  nodes: { host: string; port: number }[]
}

/** A Redis URL's parts; a URL that is not one is refused with ERR_OPTIONS (`variable`: where it came from). */
export function parseRedisUrl(url: string, variable = 'connection'): ParsedUrl {
  const bad = (message: string): never => badConnection(message, variable)
  const scheme = /^(redis|rediss)(\+cluster)?:\/\//i.exec(url)
  if (!scheme?.[1])
    return bad(`expected a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL, got: ${JSON.stringify(redactUrl(url))}`)
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
    if (!m?.[1]) return bad(`bad host in Redis URL ${JSON.stringify(redactUrl(url))}`)
    const port = m[2] ? Number(m[2]) : 6379
    if (port < 1 || port > 65_535) return bad(`port ${port} in Redis URL ${JSON.stringify(redactUrl(url))} is outside 1-65535`)
    return { host: m[1].replace(/^\[|\]$/g, ''), port }
  })
  const db = dbPart.split('?')[0] ?? ''
  if (db !== '' && !/^\d+$/.test(db)) return bad(`bad database number in Redis URL ${JSON.stringify(redactUrl(url))}`)
  return {
    tls: scheme[1].toLowerCase() === 'rediss',
    cluster: Boolean(scheme[2]),
    username: colon === -1 ? decode(auth) : decode(auth.slice(0, colon)),
    password: colon === -1 ? undefined : decode(auth.slice(colon + 1)),
    db: db === '' ? 0 : Number(db),
    nodes,
  }
}

/** A client's own keyPrefix would put the queue's keys where the reaper and the scripts' KEYS do not look. */
function checkClient(client: RedisClient): void {
  const options = client instanceof Cluster ? { ...client.options.redisOptions, ...client.options } : client.options
  if (options.keyPrefix) badConnection('connection: an ioredis client with keyPrefix is not supported: use the prefix option instead')
}

export function openConnection(connection: unknown, options: OpenOptions = {}): Connection {
  if (isClient(connection)) {
    checkClient(connection)
    return { client: connection, owned: false }
  }
  const base = options.redisOptions ?? resilient()
  const { client, endpoint } = isPlainObject(connection) ? fromObject(connection, base) : fromUrl(connection, options, base)
  watch(client, endpoint)
  return { client, owned: true, where: `Redis at ${redactUrl(resolveUrl(connection))}` }
}

/** replyMapping left out: ioredis's constructors type it without undefined (exactOptionalPropertyTypes). */
type NodeOptions = Omit<RedisOptions, 'replyMapping'>

interface Opened {
  client: RedisClient
  endpoint: Endpoint | undefined
}

/** ioredis options as given over EchoMQ's settings (as BullMQ: the user's win). */
function fromObject(connection: ConnectionObject, base: RedisOptions): Opened {
  const given = checkConnectionObject(connection) as NodeOptions
  const merged: NodeOptions = { ...base, ...given }
  const client = new Redis(merged)
  const direct = given.path === undefined && given.sentinels === undefined
  return {
    client,
    endpoint: direct ? { host: given.host ?? '127.0.0.1', port: given.port ?? 6379, tls: tlsOf(client.options) } : undefined,
  }
}

/**
 * The TLS options a connection is made with, for diagnosing it. ioredis 6.1 also takes a profile's name
 * (`tls: 'RedisCloudFixed'`, or `{ profile }`) and makes a client's options from the profile (its CA);
 * a name it does not know stays a name, and means TLS with Node's own CAs.
 */
function tlsOf(options: { tls?: RedisOptions['tls'] }): Endpoint['tls'] {
  const { tls } = options
  return typeof tls === 'string' ? {} : tls
}

function fromUrl(connection: unknown, options: OpenOptions, base: RedisOptions): Opened {
  const url = resolveUrl(connection)
  const parsed = parseRedisUrl(url, connection === undefined ? 'REDIS_URL' : 'connection')
  const { tls, ...plain } = base
  const common: NodeOptions = {
    ...plain,
    ...(parsed.username ? { username: parsed.username } : {}),
    ...(parsed.password ? { password: parsed.password } : {}),
    ...(parsed.tls ? { tls: typeof tls === 'string' ? tls : { ...tls } } : {}),
  }
  const node = parsed.nodes[0]
  const cluster = parsed.cluster || options.cluster === true
  if (!node || (!cluster && parsed.nodes.length > 1)) {
    badConnection(`a non-cluster Redis URL names one host, got: ${JSON.stringify(redactUrl(url))}`)
  }
  const endpoint = { host: node.host, port: node.port, tls: tlsOf(common) }
  if (cluster) return { client: openCluster(parsed.nodes, common), endpoint }
  return { client: new Redis({ ...common, host: node.host, port: node.port, db: parsed.db }), endpoint }
}

/**
 * A Cluster whose calls are bounded as a Redis's are: ioredis applies commandTimeout only once a call
 * reaches a node, so a call made while no node is reachable would wait in the cluster's queue for ever.
 */
class BoundedCluster extends Cluster {
  override sendCommand(command: Command, stream?: Parameters<Cluster['sendCommand']>[1], node?: unknown): unknown {
    const timeoutMs = this.options.redisOptions?.commandTimeout
    if (timeoutMs !== undefined) command.setTimeout(timeoutMs)
    return super.sendCommand(command, stream, node)
  }
}

function openCluster(seeds: { host: string; port: number }[], common: NodeOptions): Cluster {
  const options = {
    // Reach the seeds by name: resolved first, they would be addresses, which a certificate for host
    // names does not hold (ioredis's recipe for ElastiCache with TLS).
    dnsLookup: (address, done) => done(null, address),
    // Reconnect the cluster as a node would: for ever for a Queue or Worker, a few times for the sweep,
    // the reaper and the command (whose waiting calls then fail, rather than wait for ever).
    clusterRetryStrategy: common.retryStrategy ?? null,
    // The node options, as given: ioredis's Cluster type leaves out a few that it sets per node itself.
    redisOptions: common,
  } satisfies ClusterOptions
  return new BoundedCluster(seeds, options as ConstructorParameters<typeof BoundedCluster>[1])
}

/** Failures reach callers as rejected commands; without a listener ioredis also prints each one. */
function watch(client: RedisClient, endpoint: Endpoint | undefined): void {
  if (endpoint) endpoints.set(client, endpoint)
  client.on('error', (err: Error) => {
    const cause = clusterCause(err)
    // A server that is not Redis answers, then drops the line: keep the answer, which names the cause.
    if (!NOT_REDIS.test(lastErrors.get(client)?.message ?? '')) lastErrors.set(client, cause)
    const known = endpoint && explain(cause, endpoint)
    if (known) problems.set(client, known)
    else if (isReply(cause)) problems.delete(client)
    else startDiagnosis(client, cause)
    // ioredis reports a refused SELECT (a database the server does not have) as an error event and goes
    // on in database 0. This comes before the connection is ready, so closing here means no command
    // runs in the wrong database: each one fails, naming this error.
    if (/DB index is out of range|invalid DB index/i.test(err.message)) client.disconnect()
  })
  // A TLS server drops a plain client's line without an error event, and a TLS client on a plain port
  // waits until connectTimeout, as long as a call does: a connection slow to come up is diagnosed early.
  let slow: NodeJS.Timeout | undefined
  client.on('connecting', () => {
    clearTimeout(slow)
    slow = setTimeout(() => {
      if (client.status !== 'ready') startDiagnosis(client, lastErrors.get(client) ?? new Error(NO_CONNECTION_YET))
    }, SLOW_CONNECT_MS).unref()
  })
  client.on('end', () => clearTimeout(slow))
  // A node the slots name (not a seed) that refuses its certificate, say: the seeds' diagnosis cannot see it.
  if (client instanceof Cluster) {
    client.on('node error', (err: Error, key: string) => {
      if (client.status === 'ready') return // a node lost while the cluster serves: not why it does not connect
      const at = /^(.*):(\d+)$/.exec(key)
      const known = endpoint && at?.[1] && explain(err, { ...endpoint, host: at[1], port: Number(at[2]) })
      if (known) problems.set(client, known)
    })
  }
  client.on('ready', () => {
    clearTimeout(slow)
    lastErrors.delete(client)
    problems.delete(client)
    diagnoses.delete(client)
  })
}

/** "Failed to refresh slots cache" says only that no seed answered; the last node's error says why, when it does. */
function clusterCause(err: Error): Error {
  const last = (err as { lastNodeError?: unknown }).lastNodeError
  if (err.name !== 'ClusterAllFailedError' || !(last instanceof Error) || /Connection is closed/.test(last.message)) return err
  return last
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
export const QUIT_TIMEOUT_MS = 2_000

/** Drops the link now: a connection the caller passed in is theirs (their other users share it), left as it is. */
export function dropConnection(conn: Connection): void {
  if (conn.owned) conn.client.disconnect()
}

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
