/**
 * The reaper: runs the two-phase sweep over every queue, `config.sweeps` times spaced `config.intervalMs`
 * apart, and returns per-queue totals. One queue's failure (a key of the wrong type, a script error) is
 * recorded for that queue and does not stop the others; a connection failure ends the run.
 *
 * `createReaper` is what the Lambda handler (functions/sweep.ts) and `echomq sweep` call: it keeps the
 * connection (and the CloudWatch client) across runs, and each `run()` is one invocation: sweeps,
 * counts, metrics (config.metricsMode) with the failed jobs it claimed (failures.ts), and one summary
 * log line.
 */

import { redisError } from '../errors.js'
import type { SweepSettings } from '../options.js'
import type { RedisClient } from '../redis/connection.js'
import { queueKeys } from '../redis/keys.js'
import { registeredQueues } from '../registry.js'
import { sweepQueue } from '../sweep.js'
import type { ReaperConfig } from './config.js'
import { ReaperConnection } from './connection.js'
import { Discovery } from './discovery.js'
import type { Log } from './log.js'
import { RunReporter } from './report.js'
import { emptyRun, type QueueRun } from './run.js'
import { WorkerScaler } from './scaling.js'

export type { Log }

export interface ReaperSummary {
  sweeps: number
  queues: Record<string, { marked: number; recovered: number; failed: number; error?: string }>
  /** Worker functions started, by queue (only with WORKER_FUNCTIONS). */
  workersStarted?: Record<string, number>
}

export interface RunOptions {
  log: Log
  /** Milliseconds left before the run must end (a Lambda's remaining time); no limit when absent. */
  remainingMs?: () => number
  sleep?: (ms: number) => Promise<void>
  /** A monotonic clock (ms) that times each pass; tests inject one. */
  now?: () => number
  /** Queues to sweep instead of config.queues / the registry. */
  queues?: string[]
  /** Finds queues that need the reaper and are missing from the registry (kept by the caller across runs). */
  discovery?: Discovery
  /** After each pass (the reaper starts worker functions there: scaling.ts). */
  afterPass?: (client: RedisClient) => Promise<void>
}

/** Time kept free at the end of a run for the counts and the metrics. */
const END_RESERVE_MS = 2_000
/** The next pass is planned as this many times the last one (a slower network, more queues). */
const PASS_SAFETY = 1.5

async function forEachLimit<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++] as T)
  })
  await Promise.all(lanes)
}

/** The registry, plus queues that need the reaper and that discovery found missing from it. */
async function listQueues(client: RedisClient, prefix: string, discovery: Discovery | undefined, log: Log): Promise<string[]> {
  const registered = await registeredQueues(client, prefix)
  const missing = discovery ? await discovery.missing(client, registered) : []
  if (missing.length === 0) return registered
  log('warn', 'queues with jobs were missing from the registry (a Redis restart, a failover, a deleted key); registered again', {
    queues: missing,
  })
  return [...registered, ...missing].sort()
}

/** What every queue's pass of one run shares. */
interface PassSettings {
  prefix: string
  settings: SweepSettings
  readFailures: boolean
  log: Log
}

/** One queue's pass, its counts added to `run`; a failure other than the connection's stays with the queue. */
async function sweepOne(client: RedisClient, queue: string, run: QueueRun, sweep: number, p: PassSettings): Promise<void> {
  const started = performance.now()
  try {
    const pass = await sweepQueue(client, queueKeys(p.prefix, queue), p.settings, { readFailures: p.readFailures })
    const durationMs = Math.round((performance.now() - started) * 100) / 100
    run.marked += pass.marked.length
    run.recovered += pass.recovered.length
    run.failed += pass.failed.length
    // Read, not taken: each pass sees the whole count left to claim, so the last one is the run's.
    if (p.readFailures) run.failedPending = pass.failedNew
    run.durations.push(durationMs)
    run.counts = pass.counts
    if (pass.oldestWaitMs === undefined) delete run.oldestWaitAgeMs
    else run.oldestWaitAgeMs = pass.oldestWaitMs
    // Only a pass that did something is worth a line: an idle fleet of queues logs nothing per queue.
    if (pass.marked.length + pass.recovered.length + pass.failed.length + pass.promoted + pass.trimmed > 0) {
      p.log('info', 'sweep', {
        queue,
        sweep,
        marked: pass.marked.length,
        recovered: pass.recovered.length,
        failed: pass.failed.length,
        promoted: pass.promoted,
        trimmed: pass.trimmed,
        durationMs,
      })
    }
  } catch (err) {
    const failure = redisError(queue, 'sweep', err)
    if (failure.code === 'ERR_CONNECTION') throw failure
    run.error = failure.message
    run.errorCode = failure.code
    if (failure.hint !== undefined) run.hint = failure.hint
    p.log('error', 'sweep failed for this queue; other queues go on', {
      queue,
      sweep,
      errorCode: failure.code,
      error: run.error,
      ...(failure.hint === undefined ? {} : { hint: failure.hint }),
    })
  }
}

/** Whether another sweep fits in what is left of the invocation. */
function timeForAnother(config: ReaperConfig, options: RunOptions, lastPassMs: number, sweeps: number): boolean {
  // Another sweep must fit: the wait, a pass as long as the last one with half again for a slower
  // network, one command that takes the whole timeout, and the metrics at the end.
  const left = options.remainingMs?.() ?? Number.POSITIVE_INFINITY
  const needed = config.intervalMs + Math.ceil(lastPassMs * PASS_SAFETY) + config.redisTimeoutMs + END_RESERVE_MS
  if (left <= needed) {
    options.log('warn', 'stopping early: not enough time left for another sweep', {
      done: sweeps,
      planned: config.sweeps,
      remainingMs: left,
      neededMs: needed,
      lastPassMs: Math.round(lastPassMs),
    })
    return false
  }
  return true
}

export async function runReaper(
  client: RedisClient,
  config: ReaperConfig,
  options: RunOptions,
): Promise<{ summary: ReaperSummary; runs: Record<string, QueueRun> }> {
  const { log } = options
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  let queues: string[]
  try {
    queues = options.queues ?? config.queues ?? (await listQueues(client, config.prefix, options.discovery, log))
  } catch (err) {
    throw redisError('(registry)', 'list queues', err)
  }
  const runs: Record<string, QueueRun> = Object.fromEntries(queues.map((q) => [q, emptyRun()]))
  const settings = { prefix: config.prefix, graceMs: config.graceMs, limit: config.limit, audit: config.audit }
  // Only a reaper that publishes JobsFailed claims the failed jobs (failures.ts); one that does not leaves them.
  const pass: PassSettings = { prefix: config.prefix, settings, readFailures: config.metricsMode !== 'off', log }
  let sweeps = 0
  const now = options.now ?? (() => performance.now())
  let lastPassMs = 0
  for (let i = 0; i < config.sweeps; i++) {
    if (i > 0) {
      if (!timeForAnother(config, options, lastPassMs, sweeps)) break
      await sleep(config.intervalMs)
    }
    sweeps++
    const passStarted = now()
    await forEachLimit(queues, config.concurrency, (queue) => sweepOne(client, queue, runs[queue] as QueueRun, sweeps, pass))
    lastPassMs = now() - passStarted
    await options.afterPass?.(client)
  }
  const summary: ReaperSummary = { sweeps, queues: {} }
  for (const [queue, run] of Object.entries(runs)) {
    summary.queues[queue] = { marked: run.marked, recovered: run.recovered, failed: run.failed, ...(run.error ? { error: run.error } : {}) }
  }
  return { summary, runs }
}

export interface Reaper {
  /** One invocation: every sweep, the counts, a log line per queue, the metrics and a summary log line. */
  run(options?: Pick<RunOptions, 'queues' | 'remainingMs'>): Promise<ReaperSummary>
  /** Closes the connection; a later run opens a new one. */
  close(): Promise<void>
}

export function createReaper(config: ReaperConfig, { log, sleep }: Pick<RunOptions, 'log' | 'sleep'>): Reaper {
  const connection = new ReaperConnection(config, log)
  const discovery = new Discovery(config.prefix)
  const reporter = new RunReporter(config, log)
  const scaler = config.workerFunctions ? new WorkerScaler(config.workerFunctions, config.prefix, log) : undefined
  return {
    async run(options = {}) {
      let client: RedisClient
      let result: Awaited<ReturnType<typeof runReaper>>
      const started: Record<string, number> = {}
      const afterPass = async (c: RedisClient) => {
        for (const [queue, s] of Object.entries((await scaler?.scale(c)) ?? {})) started[queue] = (started[queue] ?? 0) + s.started
      }
      try {
        client = await connection.client()
        result = await runReaper(client, config, {
          log,
          discovery,
          ...(sleep ? { sleep } : {}),
          ...(scaler ? { afterPass } : {}),
          ...options,
        })
        if (scaler) result.summary.workersStarted = started
      } catch (err) {
        connection.discard()
        throw connection.unreachable(err)
      }
      await reporter.report(client, result.summary.sweeps, result.runs, options.queues ?? config.queues, options.remainingMs)
      return result.summary
    },
    close: () => connection.close(),
  }
}
