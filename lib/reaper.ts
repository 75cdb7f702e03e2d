/**
 * The reaper: runs the two-phase sweep over every queue, `config.sweeps` times spaced `config.intervalMs`
 * apart, and returns per-queue totals. One queue's failure (a key of the wrong type, a script error) is
 * recorded for that queue and does not stop the others; a connection failure ends the run.
 *
 * `createReaper` is what the Lambda handler (functions/sweep.ts) and `echomq sweep` call: it keeps the
 * connection (and the CloudWatch client) across runs, and each `run()` is one invocation: sweeps,
 * counts, metrics (config.metricsMode), and one summary log line.
 */
import type { RedisClient } from './connection.js'
import { EchoMQError, redisError } from './errors.js'
import { queueKeys } from './keys.js'
import type { QueueRun } from './metrics.js'
import { queueCounts } from './queue.js'
import type { ReaperConfig } from './reaper-config.js'
import { type Log, ReaperConnection } from './reaper-connection.js'
import { RunReporter } from './reaper-report.js'
import { registeredQueues } from './registry.js'
import { sweep } from './sweep.js'

export type { Log }

export interface ReaperSummary {
  sweeps: number
  queues: Record<string, { marked: number; recovered: number; failed: number; error?: string }>
}

export interface RunOptions {
  log: Log
  /** Milliseconds left before the run must end (a Lambda's remaining time); no limit when absent. */
  remainingMs?: () => number
  sleep?: (ms: number) => Promise<void>
  /** Queues to sweep instead of config.queues / the registry. */
  queues?: string[]
}

/** Time kept free at the end of a run for the counts and the metrics. */
const END_RESERVE_MS = 2_000

async function forEachLimit<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++] as T)
  })
  await Promise.all(lanes)
}

function isConnectionFailure(err: unknown): boolean {
  return err instanceof EchoMQError && err.code === 'ERR_CONNECTION'
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
    queues = options.queues ?? config.queues ?? (await registeredQueues(client, config.prefix))
  } catch (err) {
    throw redisError('(registry)', 'list queues', err)
  }
  const runs: Record<string, QueueRun> = Object.fromEntries(queues.map((q) => [q, { marked: 0, recovered: 0, failed: 0, durations: [] }]))
  let sweeps = 0
  for (let i = 0; i < config.sweeps; i++) {
    if (i > 0) {
      const left = options.remainingMs?.() ?? Infinity
      if (left <= config.intervalMs + config.redisTimeoutMs + END_RESERVE_MS) {
        log('warn', 'stopping early: not enough time left for another sweep', { done: sweeps, planned: config.sweeps, remainingMs: left })
        break
      }
      await sleep(config.intervalMs)
    }
    sweeps++
    await forEachLimit(queues, config.concurrency, async (queue) => {
      const run = runs[queue] as QueueRun
      const started = performance.now()
      try {
        const result = await sweep(client, queue, {
          prefix: config.prefix,
          graceMs: config.graceMs,
          limit: config.limit,
          audit: config.audit,
        })
        const durationMs = Math.round((performance.now() - started) * 100) / 100
        run.marked += result.marked.length
        run.recovered += result.recovered.length
        run.failed += result.failed.length
        run.durations.push(durationMs)
        log('info', 'sweep', {
          queue,
          sweep: sweeps,
          marked: result.marked.length,
          recovered: result.recovered.length,
          failed: result.failed.length,
          durationMs,
        })
      } catch (err) {
        if (isConnectionFailure(err)) throw err
        run.error = (err as Error).message
        log('error', 'sweep failed for this queue; other queues go on', {
          queue,
          sweep: sweeps,
          code: (err as EchoMQError).code,
          error: run.error,
        })
      }
    })
  }
  await forEachLimit(queues, config.concurrency, async (queue) => {
    const run = runs[queue] as QueueRun
    if (run.error) return
    try {
      run.counts = await queueCounts(client, queueKeys(config.prefix, queue), queue)
    } catch (err) {
      if (isConnectionFailure(err)) throw err
      run.error = (err as Error).message
    }
  })
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
  const reporter = new RunReporter(config, log)
  return {
    async run(options = {}) {
      let client: RedisClient
      let result: Awaited<ReturnType<typeof runReaper>>
      try {
        client = await connection.client()
        result = await runReaper(client, config, { log, ...(sleep ? { sleep } : {}), ...options })
      } catch (err) {
        connection.discard()
        throw err
      }
      await reporter.report(client, result.summary.sweeps, result.runs, options.queues ?? config.queues)
      return result.summary
    },
    close: () => connection.close(),
  }
}
