/**
 * The reaper's configuration, for the Lambda handler and `echomq sweep`. Each setting comes from an
 * explicit option (what the command's flags set), else the environment, else its default (defaults.json,
 * which serverless.yml reads too). The reaper reads the environment here only; where the Redis URL comes
 * from (REDIS_URL, REDIS_URL_PARAMETER) is decided by lib/redis/url.ts, the resolver every entry point
 * shares, which this module calls. Numeric settings share their range
 * with the library option of the same meaning (RANGES in options.ts). A bad value fails with a message
 * naming the variable or option and what it expected, and carries that name as the error's `variable`
 * (serverless/settings.cjs reads it to name the --param at package time).
 *
 *   REDIS_URL              redis://, rediss://, redis+cluster://  (see REDIS URL below)
 *   REDIS_URL_PARAMETER    SSM SecureString holding the URL, read at run time by loadReaperConfig
 *   REDIS_CLUSTER          true | false                    (false) treat REDIS_URL as a cluster seed
 *   REDIS_TIMEOUT_MS       connect and command timeout     (3000) a dead Redis fails the run this fast
 *   QUEUES                 comma list                      (every queue in the registry <prefix>:queues)
 *   PREFIX                 key prefix                      (emq)
 *   SWEEPS_PER_INVOCATION  1..60                           (1)
 *   SWEEP_INTERVAL_MS      ms between sweeps               (10000)
 *   SWEEP_GRACE_MS         min age of a mark to recover    (15000) see GRACE below
 *   SWEEP_CONCURRENCY      queues swept at once            (32)
 *   SWEEP_LIMIT            candidates per script call      (100)
 *   SWEEP_AUDIT            in-flight jobs audited per pass (32)
 *   METRICS_MODE           api | emf | off                 (api; off under `serverless invoke local`, IS_LOCAL=true)
 *   METRICS_NAMESPACE      CloudWatch namespace            (POWERTOOLS_METRICS_NAMESPACE, else EchoMQ)
 *   PER_QUEUE_METRICS      true | false                    (false) also publish each queue's metrics (dimension Queue)
 *   POWERTOOLS_METRICS_DISABLED  true turns metrics off, whatever METRICS_MODE says (as in Powertools)
 *   POWERTOOLS_SERVICE_NAME      `service` of every log line and EMF document (not a dimension); echomq-reaper when unset
 *   POWERTOOLS_PARAMETERS_MAX_AGE  seconds a Redis URL read from SSM is reused (300) before it is read again
 *   WORKER_FUNCTIONS       JSON keyed by queue             (none) worker functions to start when jobs wait (worker-functions.ts)
 *
 * REDIS URL: an explicit option, else REDIS_URL, else the SSM parameter REDIS_URL_PARAMETER names (what a
 * deployed function uses: the password stays out of the template), else, outside Lambda only,
 * redis://127.0.0.1:6379. A function running in Lambda (AWS_LAMBDA_FUNCTION_NAME set, IS_LOCAL not true)
 * with neither variable fails with ERR_CONFIG rather than silently sweeping a localhost that is not there.
 *
 * GRACE: a mark must be SWEEP_GRACE_MS old before a sweep recovers the job, whatever the number of sweeps
 * in between, so a duplicated or overlapping invocation cannot shorten the grace a paused worker gets.
 * The default equals a worker's default heartbeat interval (half of the 30 s lease): a worker that resumes
 * right after the mark renews before recovery.
 */

import { EchoMQError } from '../errors.js'
import { DEFAULTS, RANGES, type Range, validatePrefix, validateQueueName } from '../options.js'
import { parseRedisUrl } from '../redis/connection.js'
import { redisUrlSource, type UrlSource } from '../redis/url.js'
import metricNames from './metric-names.json' with { type: 'json' }
import { parseWorkerFunctions, type WorkerFunctions } from './worker-functions.js'

export const METRICS_MODES = ['api', 'emf', 'off'] as const
export type MetricsMode = (typeof METRICS_MODES)[number]

/** Ranges of the reaper's own settings (the sweep's come from RANGES). */
const REAPER_RANGES = {
  redisTimeoutMs: { min: 100, max: 60_000, unit: 'ms' },
  sweeps: { min: 1, max: 60 },
  intervalMs: { min: 0, max: 900_000, unit: 'ms' },
  concurrency: { min: 1, max: 256 },
  secretMaxAgeS: { min: 0, max: 86_400, unit: 's' },
} as const satisfies Record<string, Range>

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
  audit: number
  metricsMode: MetricsMode
  namespace: string
  /** Publish each queue's metrics (dimension Queue) besides the totals; each queue then costs ~10 custom metrics. */
  perQueueMetrics: boolean
  /** POWERTOOLS_SERVICE_NAME: a field of the EMF documents (the log lines get it from the Logger). */
  service: string | undefined
  /** How long a Redis URL read from SSM is reused before it is read again (s). */
  secretMaxAgeS: number
  /** Worker functions started when jobs wait, by queue (scaling.ts); undefined for none. */
  workerFunctions: WorkerFunctions | undefined
}

/** Explicit settings, which win over the environment. */
export type ReaperOptions = Partial<ReaperConfig>

type Env = Record<string, string | undefined>

/** Reads an SSM parameter's decrypted value (lib/reaper/secrets.ts's readSecret in the Lambda), reusing it up to maxAgeS. */
export type ReadSecret = (name: string, maxAgeS: number) => Promise<string>

/** A Redis URL from SSM is read again after this long, so a rotated password is picked up within it. */
export const SECRET_MAX_AGE_S_DEFAULT = 300

/** Powertools' spellings of a boolean. */
const TRUE = ['true', '1', 'yes', 'y', 'on']
const FALSE = ['false', '0', 'no', 'n', 'off']

function bad(name: string, expected: string, value: unknown): never {
  const text = typeof value === 'string' ? value : String(value)
  const shown = JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text)
  throw new EchoMQError('ERR_CONFIG', `${name}: expected ${expected}, got: ${shown}`, { variable: name })
}

/** Reads settings from options, then the environment, then defaults. */
class Source {
  constructor(
    private readonly options: ReaperOptions,
    readonly env: Env,
  ) {}

  /** The raw value and the name to blame: the option's, or the first variable that is set. */
  pick<K extends keyof ReaperConfig>(key: K, ...variables: string[]): { name: string; value: ReaperConfig[K] | string | undefined } {
    if (this.options[key] !== undefined) return { name: key, value: this.options[key] }
    for (const variable of variables) {
      const raw = this.env[variable]?.trim()
      if (raw !== undefined && raw !== '') return { name: variable, value: raw }
    }
    return { name: variables[0] ?? key, value: undefined }
  }

  int(
    key: 'redisTimeoutMs' | 'sweeps' | 'intervalMs' | 'graceMs' | 'concurrency' | 'limit' | 'audit' | 'secretMaxAgeS',
    variable: string,
    fallback: number,
    range: Range,
  ): number {
    const { name, value } = this.pick(key, variable)
    if (value === undefined) return fallback
    const n = typeof value === 'number' ? value : /^\d+$/.test(String(value)) ? Number(value) : Number.NaN
    const unit = range.unit ? ` (${range.unit})` : ''
    if (!Number.isInteger(n) || n < range.min || n > range.max) bad(name, `an integer from ${range.min} to ${range.max}${unit}`, value)
    return n
  }

  oneOf<T extends string>(key: 'metricsMode', variable: string, fallback: T, allowed: readonly T[]): T {
    const { name, value } = this.pick(key, variable)
    if (value === undefined) return fallback
    const text = String(value).toLowerCase() as T
    if (!allowed.includes(text)) bad(name, `one of ${allowed.join(', ')}`, value)
    return text
  }

  text(key: 'redisUrl' | 'prefix' | 'namespace', variables: string[], fallback: string): { name: string; value: string } {
    const { name, value } = this.pick(key, ...variables)
    return { name, value: value === undefined ? fallback : String(value) }
  }

  flag(key: 'cluster' | 'perQueueMetrics', variable: string, fallback: boolean): boolean {
    const { name, value } = this.pick(key, variable)
    if (value === undefined || typeof value === 'boolean') return value ?? fallback
    const text = String(value).toLowerCase()
    if (text !== 'true' && text !== 'false') bad(name, 'one of true, false', value)
    return text === 'true'
  }

  /** A variable read the Powertools way (true, 1, yes...), with no option of the same name. */
  powertoolsFlag(variable: string): boolean {
    const raw = this.env[variable]?.trim().toLowerCase()
    if (raw === undefined || raw === '' || FALSE.includes(raw)) return false
    if (!TRUE.includes(raw)) bad(variable, `one of ${[...TRUE, ...FALSE].join(', ')}`, raw)
    return true
  }

  queues(): string[] | undefined {
    const { name, value } = this.pick('queues', 'QUEUES')
    if (value === undefined) return undefined
    const list = [...new Set((Array.isArray(value) ? value : String(value).split(',')).map((q) => String(q).trim()).filter(Boolean))]
    for (const q of list) {
      try {
        validateQueueName(q)
      } catch {
        bad(name, 'a comma-separated list of queue names of 1-128 characters from [A-Za-z0-9._:-]', q)
      }
    }
    // Set but naming no queue (`,`): a mistake, not "every queue".
    if (list.length === 0) bad(name, 'a comma-separated list of queue names (unset for every queue)', String(value))
    return list
  }
}

/** Where the Redis URL comes from (see REDIS URL above, and lib/redis/url.ts, which every entry point shares). */
function urlSource(source: Source): UrlSource {
  const url = source.pick('redisUrl', 'REDIS_URL')
  return redisUrlSource(url.value === undefined ? undefined : { name: url.name, value: String(url.value) }, source.env)
}

const origin = (url: { name: string; value: string }): UrlOrigin => ({ ...url, variable: url.name })

/** Where a URL came from: what a message names, and the setting to blame (`variable`). */
interface UrlOrigin {
  name: string
  variable: string
  value: string
}

/**
 * The URL and cluster settings, checked before any connection (parseRedisUrl refuses a port outside
 * 1-65535): a configuration error here, not a connection failure later. A secret's value is never quoted back, even masked: it may
 * not be a URL at all.
 */
function redisSettings(source: Source, url: UrlOrigin, secret = false): Pick<ReaperConfig, 'redisUrl' | 'cluster'> {
  const fail = (message: string): never => {
    throw new EchoMQError('ERR_CONFIG', `${url.name}: ${secret ? message.replace(/"(?:[^"\\]|\\.)*"/g, '(value not shown)') : message}`, {
      variable: url.variable,
    })
  }
  let parsed: ReturnType<typeof parseRedisUrl> | undefined
  try {
    parsed = parseRedisUrl(url.value)
  } catch (err) {
    fail((err as Error).message)
  }
  const nodes = parsed?.nodes ?? []
  const cluster = source.flag('cluster', 'REDIS_CLUSTER', false)
  if (nodes.length > 1 && !cluster && !parsed?.cluster) {
    fail(`names ${nodes.length} hosts; several hosts are cluster seeds (set REDIS_CLUSTER=true or use redis+cluster://)`)
  }
  return { redisUrl: url.value, cluster }
}

function metricsMode(source: Source): MetricsMode {
  const explicit = source.pick('metricsMode').value !== undefined
  if (!explicit && source.powertoolsFlag('POWERTOOLS_METRICS_DISABLED')) return 'off'
  // `serverless invoke local` runs on a laptop: no metrics into the account's namespace unless asked for.
  const fallback = source.env.IS_LOCAL === 'true' ? 'off' : (DEFAULTS.metricsMode as MetricsMode)
  return source.oneOf('metricsMode', 'METRICS_MODE', fallback, METRICS_MODES)
}

/** What the Lambda handler needs before the rest of the configuration is read (it logs that read's failures). */
export function lambdaSettings(env: Env): { service: string | undefined; closeAfterRun: boolean } {
  // `serverless invoke local` (IS_LOCAL) waits for open sockets; a deployed function keeps its connection warm.
  // A service name too long for the settings is refused there, with the rest: the Logger does without it.
  const service = env.POWERTOOLS_SERVICE_NAME?.trim()
  return { service: service && service.length <= 255 ? service : undefined, closeAfterRun: env.IS_LOCAL === 'true' }
}

/** POWERTOOLS_SERVICE_NAME: the Logger's and the EMF documents' `service`. */
function serviceName(env: Env): string | undefined {
  const value = env.POWERTOOLS_SERVICE_NAME?.trim() ?? ''
  if (value.length > 255) bad('POWERTOOLS_SERVICE_NAME', 'a service name of at most 255 characters', value)
  return value === '' ? undefined : value
}

function workerFunctions(source: Source): WorkerFunctions | undefined {
  const { name, value } = source.pick('workerFunctions', 'WORKER_FUNCTIONS')
  return parseWorkerFunctions(value, name)
}

/** Every setting but the Redis URL, which may still have to be read from SSM. */
function settings(source: Source): Omit<ReaperConfig, 'redisUrl' | 'cluster'> {
  const prefix = source.text('prefix', ['PREFIX'], DEFAULTS.prefix)
  try {
    validatePrefix(prefix.value)
  } catch {
    bad(prefix.name, '1-64 characters from [A-Za-z0-9._:-]', prefix.value)
  }
  const namespace = source.text('namespace', ['METRICS_NAMESPACE', 'POWERTOOLS_METRICS_NAMESPACE'], metricNames.namespaceDefault)
  if (!/^[A-Za-z0-9._\-/#:]{1,255}$/.test(namespace.value) || namespace.value.startsWith('AWS/')) {
    bad(namespace.name, 'a CloudWatch namespace (1-255 of [A-Za-z0-9._-/#:], not starting with AWS/)', namespace.value)
  }
  const service = serviceName(source.env)
  return {
    redisTimeoutMs: source.int('redisTimeoutMs', 'REDIS_TIMEOUT_MS', DEFAULTS.redisTimeoutMs, REAPER_RANGES.redisTimeoutMs),
    queues: source.queues(),
    prefix: prefix.value,
    sweeps: source.int('sweeps', 'SWEEPS_PER_INVOCATION', DEFAULTS.sweepsPerInvocation, REAPER_RANGES.sweeps),
    intervalMs: source.int('intervalMs', 'SWEEP_INTERVAL_MS', DEFAULTS.sweepIntervalMs, REAPER_RANGES.intervalMs),
    graceMs: source.int('graceMs', 'SWEEP_GRACE_MS', DEFAULTS.sweepGraceMs, RANGES.graceMs),
    concurrency: source.int('concurrency', 'SWEEP_CONCURRENCY', DEFAULTS.sweepConcurrency, REAPER_RANGES.concurrency),
    limit: source.int('limit', 'SWEEP_LIMIT', DEFAULTS.sweepLimit, RANGES.limit),
    audit: source.int('audit', 'SWEEP_AUDIT', DEFAULTS.sweepAudit, RANGES.audit),
    metricsMode: metricsMode(source),
    namespace: namespace.value,
    perQueueMetrics: source.flag('perQueueMetrics', 'PER_QUEUE_METRICS', metricNames.perQueueDefault),
    service,
    secretMaxAgeS: source.int('secretMaxAgeS', 'POWERTOOLS_PARAMETERS_MAX_AGE', SECRET_MAX_AGE_S_DEFAULT, REAPER_RANGES.secretMaxAgeS),
    workerFunctions: workerFunctions(source),
  }
}

/** The configuration when the Redis URL is given (option, REDIS_URL, or the local default outside Lambda). */
export function reaperConfig(options: ReaperOptions = {}, env: Env = process.env): ReaperConfig {
  const source = new Source(options, env)
  const url = urlSource(source)
  if ('parameter' in url) {
    throw new EchoMQError(
      'ERR_CONFIG',
      `REDIS_URL_PARAMETER: names SSM parameter ${url.parameter}, which is read at run time: use loadReaperConfig`,
      { variable: 'REDIS_URL_PARAMETER' },
    )
  }
  return { ...redisSettings(source, origin(url)), ...settings(source) }
}

/**
 * The configuration, reading the Redis URL from SSM when REDIS_URL_PARAMETER names it. Every other
 * setting is checked first, so a bad one fails without a call to AWS.
 */
export async function loadReaperConfig(options: ReaperOptions, env: Env, readSecret: ReadSecret): Promise<ReaperConfig> {
  const source = new Source(options, env)
  const url = urlSource(source)
  const rest = settings(source)
  if (!('parameter' in url)) return { ...redisSettings(source, origin(url)), ...rest }
  // A value put from a file (`--value file://url.txt`) often ends with a newline.
  const value = (await readSecret(url.parameter, rest.secretMaxAgeS)).trim()
  return { ...redisSettings(source, { name: `SSM parameter ${url.parameter}`, variable: 'REDIS_URL_PARAMETER', value }, true), ...rest }
}
