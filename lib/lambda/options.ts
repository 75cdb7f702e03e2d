/**
 * The worker handler's options, validated once, before any Redis call. The Worker's options that make
 * sense in a function (connection, prefix, concurrency, lockDuration, limiter, name), plus:
 *   jobTimeoutMs  the longest one job may run (default: lockDuration, the lease);
 *   reserveMs     time kept back before the function's deadline for handing jobs back and returning
 *                 (default defaults.json `workerReserveMs`, 2000 ms: a few round trips to Redis, even
 *                 a slow one, with room for the runtime to send the result);
 *   maxJobs       the most jobs one invocation starts (default: no limit; an event's maxJobs lowers it);
 *   redisTimeoutMs how long the first call of an invocation may take (default defaults.json `redisTimeoutMs`);
 *   clock         tests inject one.
 * An invocation takes jobs while the function's remaining time is at least jobTimeoutMs + reserveMs.
 */
import type { Clock } from '../clock.js'
import { DEFAULTS, type WorkerSettings, workerSettings } from '../options.js'
import { checkInteger, checkKnown, fail, opt } from '../validate.js'

export interface WorkerHandlerOptions {
  /** A Redis URL, ioredis options or client; default REDIS_URL, else the SSM parameter REDIS_URL_PARAMETER names. */
  connection?: unknown
  prefix?: string
  name?: string
  concurrency?: number
  lockDuration?: number
  limiter?: { max: number; duration: number }
  jobTimeoutMs?: number
  reserveMs?: number
  maxJobs?: number
  redisTimeoutMs?: number
  clock?: Clock
}

export interface WorkerHandlerSettings {
  worker: WorkerSettings
  jobTimeoutMs: number
  reserveMs: number
  maxJobs: number | undefined
  redisTimeoutMs: number
}

export const RESERVE_MS_DEFAULT = DEFAULTS.workerReserveMs
/** A Lambda function runs at most 15 minutes. */
const FUNCTION_MAX_MS = 15 * 60_000
export const MAX_JOBS_MAX = 1_000_000

export function workerHandlerSettings(options: unknown): WorkerHandlerSettings {
  const o = checkKnown('createWorkerHandler', options, [
    'connection',
    'prefix',
    'name',
    'concurrency',
    'lockDuration',
    'limiter',
    'jobTimeoutMs',
    'reserveMs',
    'maxJobs',
    'redisTimeoutMs',
    'clock',
  ])
  const { jobTimeoutMs: _j, reserveMs: _r, maxJobs: _m, redisTimeoutMs: _t, ...rest } = o
  // A unique name per invocation is added by the handler; the Worker checks the rest, as it always does.
  const worker = workerSettings({ ...rest, connection: undefined })
  worker.connection = o.connection
  const jobTimeoutMs = opt(o.jobTimeoutMs, worker.lockDuration, (v) =>
    checkInteger('jobTimeoutMs', v, { min: 1, max: FUNCTION_MAX_MS, unit: 'ms' }),
  )
  const reserveMs = opt(o.reserveMs, RESERVE_MS_DEFAULT, (v) => checkInteger('reserveMs', v, { min: 0, max: FUNCTION_MAX_MS, unit: 'ms' }))
  if (jobTimeoutMs + reserveMs > FUNCTION_MAX_MS) {
    fail('ERR_OPTIONS', `expected jobTimeoutMs + reserveMs (${jobTimeoutMs + reserveMs} ms) to fit in a function's 15 minutes`)
  }
  return {
    worker,
    jobTimeoutMs,
    reserveMs,
    maxJobs: opt(o.maxJobs, undefined, (v) => checkInteger('maxJobs', v, { min: 1, max: MAX_JOBS_MAX })),
    redisTimeoutMs: opt(o.redisTimeoutMs, DEFAULTS.redisTimeoutMs, (v) =>
      checkInteger('redisTimeoutMs', v, { min: 1, max: 60_000, unit: 'ms' }),
    ),
  }
}
