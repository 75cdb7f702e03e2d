/**
 * The `connection` option when it is an object of ioredis options (`{ host, port, password, tls, db }`, as
 * BullMQ accepts): checked before any connection, so a mistake is a configuration error (ERR_OPTIONS,
 * `variable: 'connection'`), never a connection failure later. Only the fields EchoMQ reads (where, who,
 * TLS) are checked in depth; the rest are ioredis's, passed on as given, but an unknown name is refused
 * (ioredis would ignore it and connect to 127.0.0.1:6379), with the closest known name. `keyPrefix` is
 * refused, as BullMQ does: the queue's `prefix` is the one prefix of its keys.
 */
import { type Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis'
import { EchoMQError } from '../errors.js'

/** What `connection` may be, for every message that refuses one. */
export const CONNECTION_FORMS =
  'a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL, ioredis options ({ host, port, password, tls, db, ... }), ' +
  'or an ioredis Redis or Cluster'

/**
 * ioredis 6's RedisOptions (standalone, sentinel and common; the `maint` ones from 6.1), and BullMQ's own
 * skipVersionCheck (ignored).
 */
const IOREDIS_OPTIONS = new Set([
  ...['host', 'port', 'path', 'family', 'tls', 'username', 'password', 'db', 'connectionName', 'clientInfoTag', 'disableClientInfo'],
  ...['connectTimeout', 'commandTimeout', 'socketTimeout', 'blockingTimeout', 'blockingTimeoutGrace', 'disconnectTimeout'],
  ...['keepAlive', 'noDelay', 'retryStrategy', 'reconnectOnError', 'maxRetriesPerRequest', 'maxLoadingRetryTime'],
  ...['enableReadyCheck', 'enableOfflineQueue', 'offlineQueue', 'commandQueue', 'lazyConnect', 'enableAutoPipelining'],
  ...['autoPipeliningIgnoredCommands', 'autoResubscribe', 'autoResendUnfulfilledCommands', 'readOnly', 'stringNumbers'],
  ...['protocol', 'replyMapping', 'monitor', 'scripts', 'showFriendlyErrorStack', 'Connector', 'himportFieldsets', 'keyPrefix'],
  ...['sentinels', 'name', 'role', 'sentinelUsername', 'sentinelPassword', 'sentinelRetryStrategy', 'sentinelReconnectStrategy'],
  ...['preferredSlaves', 'sentinelCommandTimeout', 'enableTLSForSentinelMode', 'sentinelTLS', 'natMap', 'updateSentinels'],
  ...['sentinelMaxConnections', 'failoverDetector', 'maintNotifications', 'maintEndpointType', 'maintRelaxedCommandTimeout'],
  ...['maintRelaxedSocketTimeout', 'skipVersionCheck'],
])

/** Names other clients use for what ioredis calls otherwise. */
const MISTAKES: Record<string, string> = {
  url: 'ioredis options have no url: pass the URL string itself as connection',
  hostname: 'ioredis calls it host',
  cluster: 'an options object opens one Redis: for a cluster pass a redis+cluster:// URL or an ioredis Cluster',
  ssl: 'ioredis calls it tls ({} for the defaults)',
}

export type ConnectionObject = Record<string, unknown>

export function isPlainObject(value: unknown): value is ConnectionObject {
  if (typeof value !== 'object' || value === null) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

const show = (value: unknown): string => (typeof value === 'function' ? 'a function' : (JSON.stringify(value) ?? String(value)))

function bad(message: string): never {
  throw new EchoMQError('ERR_OPTIONS', `connection: ${message}`, { variable: 'connection' })
}

/** Levenshtein distance, for the closest known name. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const next = [i]
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min((row[j] ?? 0) + 1, (next[j - 1] ?? 0) + 1, (row[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    row = next
  }
  return row[b.length] ?? 0
}

function unknownName(name: string): never {
  const known = MISTAKES[name]
  if (known) bad(`unknown ioredis option "${name}" (${known})`)
  const lower = name.toLowerCase()
  const [closest] = [...IOREDIS_OPTIONS]
    .map((option) => [option, distance(lower, option.toLowerCase())] as const)
    .sort((x, y) => x[1] - y[1])
  const suggestion = closest && closest[1] <= 2 ? ` (did you mean "${closest[0]}"?)` : ''
  bad(`unknown ioredis option "${name}"${suggestion}; expected ${CONNECTION_FORMS}`)
}

/** The port as a number: ioredis takes a number or a string of digits (from an environment variable). */
function port(value: unknown): number | undefined {
  if (value === undefined) return undefined
  const n = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 65_535) {
    bad(`expected port to be an integer in 1-65535, got: ${show(value)}`)
  }
  return n
}

/** The options checked, with the port as a number; throws ERR_OPTIONS saying what is wrong. */
export function checkConnectionObject(options: ConnectionObject): ConnectionObject {
  for (const name of Object.keys(options)) if (!IOREDIS_OPTIONS.has(name)) unknownName(name)
  const { host, path, db, tls, username, password, keyPrefix } = options
  if (keyPrefix !== undefined) bad('ioredis keyPrefix is not supported: use the prefix option of the Queue or Worker')
  if (host !== undefined && (typeof host !== 'string' || host.trim() === '')) {
    bad(`expected host to be a host name or address, got: ${show(host)}`)
  }
  if (path !== undefined && (typeof path !== 'string' || path === '')) bad(`expected path to be a Unix socket path, got: ${show(path)}`)
  if (db !== undefined && (typeof db !== 'number' || !Number.isInteger(db) || db < 0)) {
    bad(`expected db to be a database number (an integer from 0), got: ${show(db)}`)
  }
  if (isPlainObject(tls) && tls.profile !== undefined && !isTlsProfile(tls.profile)) {
    bad(
      `expected tls.profile to be the name of a TLS profile of ioredis (6.1: 'RedisCloudFixed', 'RedisCloudFlexible'), got: ${show(tls.profile)}`,
    )
  }
  if (tls !== undefined && !isPlainObject(tls) && !isTlsProfile(tls)) {
    bad(
      'expected tls to be an object of node:tls options ({} for the defaults) or the name of a TLS profile of ioredis ' +
        `(6.1: 'RedisCloudFixed', 'RedisCloudFlexible'), got: ${show(tls)}`,
    )
  }
  for (const [name, value] of Object.entries({ username, password })) {
    if (value !== undefined && typeof value !== 'string') bad(`expected ${name} to be a string`)
  }
  checkMaint(options)
  const p = port(options.port)
  return p === undefined ? options : { ...options, port: p }
}

/** ioredis 6.1's values of its maintenance options (its MaintNotifications and MaintEndpointType). */
const MAINT_VALUES: Record<string, readonly string[]> = {
  maintNotifications: ['auto', 'enabled', 'disabled'],
  maintEndpointType: ['auto', 'internal-ip', 'internal-fqdn', 'external-ip', 'external-fqdn', 'none'],
}

/** ioredis passes its maintenance options to Redis unchecked: a wrong one would fail the first command. */
function checkMaint(options: ConnectionObject): void {
  for (const [name, values] of Object.entries(MAINT_VALUES)) {
    const value = options[name]
    if (value !== undefined && !values.includes(value as string))
      bad(`expected ${name} to be one of ${values.join(', ')}, got: ${show(value)}`)
  }
  for (const name of ['maintRelaxedCommandTimeout', 'maintRelaxedSocketTimeout']) {
    const value = options[name]
    if (value !== undefined && (typeof value !== 'number' || !Number.isInteger(value) || value < 0))
      bad(`expected ${name} to be a number of ms (an integer from 0), got: ${show(value)}`)
  }
}

/** Where an options object points, as a URL without its password (for messages). */
export function describeConnectionObject(options: ConnectionObject): string {
  const sentinels = options.sentinels
  if (Array.isArray(sentinels)) {
    const where = sentinels.map((s: { host?: string; port?: number }) => `${s.host ?? '127.0.0.1'}:${s.port ?? 26379}`).join(',')
    return `sentinel ${String(options.name ?? 'mymaster')} via ${where}`
  }
  if (typeof options.path === 'string') return `unix:${options.path}`
  const scheme = options.tls ? 'rediss' : 'redis'
  const user = typeof options.username === 'string' && options.username !== '' ? `${options.username}@` : ''
  const db = typeof options.db === 'number' && options.db !== 0 ? `/${options.db}` : ''
  return `${scheme}://${user}${String(options.host ?? '127.0.0.1')}:${String(options.port ?? 6379)}${db}`
}

/**
 * What `connection` takes, typed (BullMQ's ConnectionOptions, with EchoMQ's URL string): ioredis options, an
 * ioredis Redis or Cluster, or a URL. An options object for a cluster (ClusterOptions) type-checks, as in
 * BullMQ, and is refused when given (ERR_OPTIONS: pass an ioredis Cluster or a redis+cluster:// URL).
 */
export type ConnectionOptions = RedisOptions | ClusterOptions | Redis | Cluster | string

/**
 * Whether the installed ioredis makes TLS options of `name` (its profiles, from 6.1: `tls: 'RedisCloudFixed'`).
 * It does so in its client's constructor, and exports neither the profiles nor their names: a client that
 * never connects (lazyConnect) is asked. A name it does not know would reach node:tls as a string.
 */
function isTlsProfile(name: unknown): boolean {
  if (typeof name !== 'string') return false
  const probe = new Redis({ lazyConnect: true, tls: name as RedisOptions['tls'] })
  const known = isPlainObject(probe.options.tls)
  probe.disconnect()
  return known
}
