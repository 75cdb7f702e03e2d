/**
 * The reaper: runs the two-phase sweep over every queue, `config.sweeps` times spaced `config.intervalMs`
 * apart, and returns per-queue totals. One queue's failure (a key of the wrong type, a script error) is
 * recorded for that queue and does not stop the others; a connection failure ends the run.
 *
 * `createReaper` is what the Lambda handler (functions/sweep.ts) and `echomq sweep` call: it keeps the
 * connection (and the CloudWatch client) across runs, and each `run()` is one invocation: sweeps,
 * counts, metrics (config.metricsMode) with the failed jobs it claimed (failures.ts), a log line for each
 * queue where something happened and one summary line (report.ts).
 */

import { redisError } from '../errors.js'
import type { SweepSettings } from '../options.js'
import type { RedisClient } from '../redis/connection.js'
import { type QueueKeys, queueKeys } from '../redis/keys.js'
import { registeredQueues } from '../registry.js'
import { sweepQueue } from '../sweep.js'
import type { ReaperConfig } from './config.js'
import { ReaperConnection } from './connection.js'
import { Discovery } from './discovery.js'
import type { Log } from './log.js'
import { RunReporter } from './report.js'
import { emptyRun, IDS_LOGGED, type QueueRun } from './run.js'
import { WorkerScaler } from './scaling.js'

export type { Log }

export interface ReaperSummary {
  sweeps: number
  queues: Record<string, { marked: number; recovered: number; failed: number; error?: string }>
  /** Worker functions started, by queue (only with WORKER_FUNCTIONS). */
  workersStarted?: Record<string, number>
}

/** What a queue's last pass saw, for the next one. */
export interface Seen {
  head: string | undefined
  inFlight: string[]
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
  /** After each pass, with every queue's run so far (the reaper starts worker functions there: scaling.ts). */
  afterPass?: (client: RedisClient, runs: Record<string, QueueRun>) => Promise<void>
  /** Queues whose sweeps read the backlog of their worker functions for afterPass. */
  backlogOf?: ReadonlySet<string>
  /**
   * What each queue's last pass saw (kept by the caller across runs): the job next in line and the jobs
   * in flight it audited. A queue whose line has not moved and whose jobs in flight are alive costs one
   * call: its probe reads that job's wait and those leases (sweepQueue's knownHead and knownInFlight).
   */
  seen?: Map<string, Seen>
  /** Each queue's keys, built once (kept by the caller across runs: 10,000 queues, 10,000 objects less a run). */
  keys?: Map<string, QueueKeys>
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
  /** Queues whose probe also reads the backlog of their worker functions (WORKER_FUNCTIONS). */
  backlogOf: ReadonlySet<string>
  seen: Map<string, Seen>
  keys: Map<string, QueueKeys>
  log: Log
}

/** Keeps the first IDS_LOGGED of `ids` in `into` (the log names a few; the counts are whole). */
function keepIds(into: string[] | undefined, ids: string[]): string[] | undefined {
  if (ids.length === 0 || (into?.length ?? 0) >= IDS_LOGGED) return into
  return [...(into ?? []), ...ids].slice(0, IDS_LOGGED)
}

/**
 * One queue's pass, its counts added to `run`; a failure other than the connection's stays with the queue.
 * Nothing is logged here for a pass that went well: the reporter writes one line per queue where something
 * happened, once per invocation (report.ts).
 */
async function sweepOne(client: RedisClient, queue: string, run: QueueRun, sweep: number, p: PassSettings): Promise<void> {
  const started = performance.now()
  delete run.backlog
  try {
    let keys = p.keys.get(queue)
    if (!keys) {
      keys = queueKeys(p.prefix, queue)
      p.keys.set(queue, keys)
    }
    const pass = await sweepQueue(client, keys, p.settings, {
      readFailures: p.readFailures,
      readBacklog: p.backlogOf.has(queue),
      knownHead: p.seen.get(queue)?.head,
      knownInFlight: p.seen.get(queue)?.inFlight,
    })
    if (pass.head === undefined && pass.auditWindow.length === 0) p.seen.delete(queue)
    else p.seen.set(queue, { head: pass.head, inFlight: pass.auditWindow })
    run.durations.push(Math.round((performance.now() - started) * 100) / 100)
    run.marked += pass.marked.length
    run.recovered += pass.recovered.length
    run.failed += pass.failed.length
    run.promoted += pass.promoted
    run.trimmed += pass.trimmed
    const recoveredIds = keepIds(run.recoveredIds, pass.recovered)
    if (recoveredIds) run.recoveredIds = recoveredIds
    const failedIds = keepIds(run.failedIds, pass.failed)
    if (failedIds) run.failedIds = failedIds
    // Read, not taken: each pass sees the whole count left to claim, so the last one is the run's.
    if (p.readFailures) run.failedPending = pass.failedNew
    run.counts = pass.counts
    if (pass.oldestWaitMs === undefined) delete run.oldestWaitAgeMs
    else run.oldestWaitAgeMs = pass.oldestWaitMs
    if (pass.backlog) run.backlog = pass.backlog
  } catch (err) {
    p.seen.delete(queue)
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
  const pass: PassSettings = {
    prefix: config.prefix,
    settings,
    readFailures: config.metricsMode !== 'off',
    backlogOf: options.backlogOf ?? new Set(),
    seen: options.seen ?? new Map(),
    keys: options.keys ?? new Map(),
    log,
  }
  // A queue gone from the registry is forgotten (a run over listed queues leaves the others be).
  if (!options.queues && !config.queues) {
    for (const queue of pass.seen.keys()) if (!(queue in runs)) pass.seen.delete(queue)
    for (const queue of pass.keys.keys()) if (!(queue in runs)) pass.keys.delete(queue)
  }
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
    await options.afterPass?.(client, runs)
  }
  const summary: ReaperSummary = { sweeps, queues: {} }
  for (const [queue, run] of Object.entries(runs)) {
    summary.queues[queue] = { marked: run.marked, recovered: run.recovered, failed: run.failed, ...(run.error ? { error: run.error } : {}) }
  }
  return { summary, runs }
}

export interface Reaper {
  /** One invocation: every sweep, the counts, the metrics, a log line per queue where something happened, a summary line. */
  run(options?: Pick<RunOptions, 'queues' | 'remainingMs'>): Promise<ReaperSummary>
  /** Closes the connection; a later run opens a new one. */
  close(): Promise<void>
}

export function createReaper(config: ReaperConfig, { log, sleep }: Pick<RunOptions, 'log' | 'sleep'>): Reaper {
  const connection = new ReaperConnection(config, log)
  const discovery = new Discovery(config.prefix)
  const seen = new Map<string, Seen>()
  const keys = new Map<string, QueueKeys>()
  const reporter = new RunReporter(config, log)
  const scaler = config.workerFunctions ? new WorkerScaler(config.workerFunctions, config.prefix, log) : undefined
  return {
    async run(options = {}) {
      let client: RedisClient
      let result: Awaited<ReturnType<typeof runReaper>>
      const started: Record<string, number> = {}
      const afterPass = async (c: RedisClient, runs: Record<string, QueueRun>) => {
        for (const [queue, s] of Object.entries((await scaler?.scale(c, runs)) ?? {})) {
          started[queue] = (started[queue] ?? 0) + s.started
          const run = runs[queue]
          if (run && s.started > 0) run.workersStarted = (run.workersStarted ?? 0) + s.started
        }
      }
      try {
        client = await connection.client()
        result = await runReaper(client, config, {
          log,
          discovery,
          seen,
          keys,
          ...(sleep ? { sleep } : {}),
          ...(scaler ? { afterPass, backlogOf: scaler.queues } : {}),
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
