/**
 * The Redis a command talks to. Its URL comes by the reaper's rule (lib/redis/url.ts), so `echomq` and the
 * Lambda never disagree about which Redis they mean: --redis-url, then REDIS_URL, then the SSM SecureString
 * that REDIS_URL_PARAMETER names (read with the reaper's readSecret: the same bounded client, the same
 * messages), then the local default. A URL is checked before any connection (a bad one is a usage error);
 * a value read from SSM is never quoted back, since it may be a bare password.
 *
 * Commands other than demo and race use a fail-fast client: a Redis that does not answer is reported as
 * unreachable (exit 1) within REDIS_TIMEOUT_MS's default, not retried for minutes, with what to fix when a
 * diagnosis finds it (lib/redis/diagnosis.ts: a certificate refused, TLS on a plain port or the reverse).
 */
import { EchoMQError, notRedisHint, withLastError } from '../lib/errors.js'
import { DEFAULTS } from '../lib/options.js'
import { SSM_PEER_DEPENDENCIES } from '../lib/reaper/peers.js'
import { explainFailure, failFast, openConnection, parseRedisUrl, type RedisClient, redactUrl } from '../lib/redis/connection.js'
import { redisUrlSource } from '../lib/redis/url.js'
import { CliError, loadReaperModule, messageOf } from './errors.js'
import { startLocalRedis } from './support/local-redis.js'

type Env = Record<string, string | undefined>

export interface RedisTarget {
  url: string
  /** Nothing named a Redis: the local default applies (demo and race start their own redis-server instead). */
  fallback: boolean
}

/**
 * Reads an SSM parameter the way the reaper does; a plain String parameter is allowed, with a warning on
 * stderr. The AWS SDK is loaded only then: a command given its URL otherwise starts without it.
 */
export async function readParameter(name: string): Promise<string> {
  const { readSecret } = await loadReaperModule(
    'reading REDIS_URL_PARAMETER',
    () => import('../lib/reaper/secrets.js'),
    SSM_PEER_DEPENDENCIES,
  )
  return readSecret(name, { warn: (message) => void process.stderr.write(`warn: ${message}\n`) })
}

type Flags = { 'redis-url'?: string | undefined }

function checkUrl(url: string): void {
  try {
    parseRedisUrl(url)
  } catch (err) {
    throw new CliError(messageOf(err), true)
  }
}

/** --redis-url, checked; undefined when it is not given (or empty). */
export function redisUrlFlag(values: Flags): string | undefined {
  const flag = values['redis-url']
  if (!flag) return undefined
  checkUrl(flag)
  return flag
}

/** The command's Redis URL (see the header); reads SSM only when REDIS_URL_PARAMETER is what names it. */
export async function redisUrlOf(values: Flags, env: Env = process.env, read = readParameter): Promise<RedisTarget> {
  const flag = redisUrlFlag(values)
  const source = redisUrlSource(flag === undefined ? undefined : { name: '--redis-url', value: flag }, env)
  if (!('parameter' in source)) {
    checkUrl(source.value)
    return { url: source.value, fallback: source.fallback === true }
  }
  // A value put from a file (`--value file://url.txt`) often ends with a newline.
  const url = (await read(source.parameter)).trim()
  try {
    parseRedisUrl(url)
  } catch (err) {
    const unquoted = messageOf(err).replace(/"(?:[^"\\]|\\.)*"/g, '(value not shown)')
    throw new EchoMQError('ERR_CONFIG', `SSM parameter ${source.parameter}: ${unquoted}`, { variable: 'REDIS_URL_PARAMETER' })
  }
  return { url, fallback: false }
}

/** Runs `fn` with a fail-fast client on `url`; a failure that is not EchoMQ's own is reported as Redis unreachable. */
export async function withClient<T>(url: string, fn: (client: RedisClient) => Promise<T>): Promise<T> {
  const conn = openConnection(url, { redisOptions: failFast(DEFAULTS.redisTimeoutMs) })
  try {
    return await fn(conn.client)
  } catch (err) {
    if (err instanceof CliError || (err instanceof EchoMQError && err.code !== 'ERR_CONNECTION')) throw err
    const last = await explainFailure(conn.client, err as Error)
    // A library call's error named the connection's error as it stood; the diagnosis may have come since.
    if (err instanceof EchoMQError)
      throw last && !err.message.includes(last.message) ? new CliError(`${err.message} (${last.message})`) : err
    const message = withLastError(messageOf(err), last)
    throw new CliError(`Redis at ${redactUrl(url)} is unreachable: ${message}${notRedisHint(message)}`)
  } finally {
    conn.client.disconnect()
  }
}

/** The Redis for demo and race: the one named, or a private redis-server started for the run (`own`) and stopped after. */
export async function withDemoRedis<T>(values: Flags, fn: (url: string, own: boolean) => Promise<T>): Promise<T> {
  const named = await redisUrlOf(values)
  if (!named.fallback) return fn(named.url, false)
  const local = await startLocalRedis()
  try {
    return await fn(local.url, true)
  } finally {
    await local.stop()
  }
}
