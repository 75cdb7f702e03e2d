/**
 * The reaper's configuration, read from the environment once and validated; a bad value fails with a
 * message naming the variable and what it expected. Used by the Lambda handler and `echomq sweep`.
 *
 *   REDIS_URL              redis://, rediss://, redis+cluster://  (default redis://127.0.0.1:6379)
 *   REDIS_CLUSTER          true | false                    (false) treat REDIS_URL as a cluster seed
 *   REDIS_TIMEOUT_MS       connect and command timeout     (3000) a dead Redis fails the run this fast
 *   QUEUES                 comma list                      (every queue in the registry <prefix>:queues)
 *   PREFIX                 key prefix                      (emq)
 *   SWEEPS_PER_INVOCATION  1..60                           (1)
 *   SWEEP_INTERVAL_MS      ms between sweeps               (10000)
 *   SWEEP_GRACE_MS         min age of a mark to recover    (15000) see GRACE below
 *   SWEEP_CONCURRENCY      queues swept at once            (8)
 *   SWEEP_LIMIT            candidates per script call      (100)
 *   METRICS_MODE           api | emf | off                 (api)
 *   METRICS_NAMESPACE      CloudWatch namespace            (EchoMQ)
 *
 * GRACE: a mark must be SWEEP_GRACE_MS old before a sweep recovers the job, whatever the number of sweeps
 * in between, so a duplicated or overlapping invocation cannot shorten the grace a paused worker gets.
 * The default equals a worker's default heartbeat interval (half of the 30 s lease): a worker that resumes
 * right after the mark renews before recovery.
 */
import { EchoMQError } from './errors.js'
import { parseRedisUrl, REDIS_URL_DEFAULT } from './connection.js'
import metricNames from './metric-names.json' with { type: 'json' }
import { PREFIX_DEFAULT, SWEEP_LIMIT_DEFAULT, validatePrefix, validateQueueName } from './options.js'

export const SWEEPS_PER_INVOCATION_DEFAULT = 1
export const SWEEP_INTERVAL_MS_DEFAULT = 10_000
export const REAPER_GRACE_MS_DEFAULT = 15_000
export const SWEEP_CONCURRENCY_DEFAULT = 8
export const REDIS_TIMEOUT_MS_DEFAULT = 3_000

export type MetricsMode = 'api' | 'emf' | 'off'

export interface ReaperConfig {
  redisUrl: string
  cluster: boolean
  redisTimeoutMs: number
  queues: string[] | undefined
  prefix: string
  sweeps: number
  intervalMs: number
  graceMs: number
  concurrency: number
  limit: number
  metricsMode: MetricsMode
  namespace: string
}

type Env = Record<string, string | undefined>

function bad(name: string, expected: string, value: string): never {
  throw new EchoMQError('ERR_CONFIG', `${name}: expected ${expected}, got: ${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)}`)
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim()
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) bad(name, `an integer from ${min} to ${max}`, raw)
  return Number(raw)
}

function oneOf<T extends string>(env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = env[name]?.trim()
  if (raw === undefined || raw === '') return fallback
  const value = raw.toLowerCase() as T
  if (!allowed.includes(value)) bad(name, `one of ${allowed.join(', ')}`, raw)
  return value
}

export function readReaperConfig(env: Env = process.env): ReaperConfig {
  const redisUrl = env.REDIS_URL?.trim() || REDIS_URL_DEFAULT
  let seeds: number
  let clusterScheme: boolean
  try {
    const parsed = parseRedisUrl(redisUrl)
    seeds = parsed.nodes.length
    clusterScheme = parsed.cluster
  } catch (err) {
    throw new EchoMQError('ERR_CONFIG', `REDIS_URL: ${(err as Error).message}`)
  }
  const prefixRaw = env.PREFIX?.trim() || PREFIX_DEFAULT
  let prefix: string
  try {
    prefix = validatePrefix(prefixRaw)
  } catch {
    bad('PREFIX', '1-64 characters from [A-Za-z0-9._:-]', prefixRaw)
  }
  const queuesRaw = env.QUEUES?.trim()
  let queues: string[] | undefined
  if (queuesRaw) {
    queues = [...new Set(queuesRaw.split(',').map((q) => q.trim()).filter(Boolean))]
    for (const q of queues) {
      try {
        validateQueueName(q)
      } catch {
        bad('QUEUES', 'a comma-separated list of queue names of 1-128 characters from [A-Za-z0-9._:-]', q)
      }
    }
  }
  const namespace = env.METRICS_NAMESPACE?.trim() || metricNames.namespaceDefault
  if (!/^[A-Za-z0-9._\-/#:]{1,255}$/.test(namespace) || namespace.startsWith('AWS/')) {
    bad('METRICS_NAMESPACE', 'a CloudWatch namespace (1-255 of [A-Za-z0-9._-/#:], not starting with AWS/)', namespace)
  }
  const cluster = oneOf(env, 'REDIS_CLUSTER', 'false', ['true', 'false'] as const) === 'true'
  if (seeds > 1 && !cluster && !clusterScheme) {
    throw new EchoMQError('ERR_CONFIG', `REDIS_URL: names ${seeds} hosts; several hosts are cluster seeds (set REDIS_CLUSTER=true or use redis+cluster://)`)
  }
  return {
    redisUrl,
    cluster,
    redisTimeoutMs: int(env, 'REDIS_TIMEOUT_MS', REDIS_TIMEOUT_MS_DEFAULT, 100, 60_000),
    queues,
    prefix,
    sweeps: int(env, 'SWEEPS_PER_INVOCATION', SWEEPS_PER_INVOCATION_DEFAULT, 1, 60),
    intervalMs: int(env, 'SWEEP_INTERVAL_MS', SWEEP_INTERVAL_MS_DEFAULT, 0, 900_000),
    graceMs: int(env, 'SWEEP_GRACE_MS', REAPER_GRACE_MS_DEFAULT, 0, 3_600_000),
    concurrency: int(env, 'SWEEP_CONCURRENCY', SWEEP_CONCURRENCY_DEFAULT, 1, 256),
    limit: int(env, 'SWEEP_LIMIT', SWEEP_LIMIT_DEFAULT, 1, 1_000),
    metricsMode: oneOf(env, 'METRICS_MODE', 'api', ['api', 'emf', 'off'] as const),
    namespace,
  }
}
