/**
 * The reaper's run model: what one invocation did to each queue (QueueRun, filled in by runReaper in
 * reaper.ts), and the totals over every queue that the log's summary line, the metrics and the alarms
 * show (Totals, from `totals`). Pure data and arithmetic: no Redis, no AWS.
 */
import type { SweepCounts } from '../job.js'
import type { Backlog } from '../redis/commands.js'

/** Most job ids of each kind a queue's log line names (the counts are whole). */
export const IDS_LOGGED = 10

/** One queue's invocation, as runReaper reports it. */
export interface QueueRun {
  marked: number
  recovered: number
  /** Moved to failed by the sweeps (a stall on the last attempt). */
  failed: number
  /** The first IDS_LOGGED ids of the jobs recovered and of those failed by the sweeps, for the log. */
  recoveredIds?: string[]
  failedIds?: string[]
  /** Jobs the sweeps put in line (delayed jobs due, schedulers' runs) and finished jobs trimmed. */
  promoted: number
  trimmed: number
  /** Worker functions started for this queue (WORKER_FUNCTIONS). */
  workersStarted?: number
  /** The backlog of its worker functions, as the last pass read it (a queue in WORKER_FUNCTIONS). */
  backlog?: Backlog
  /**
   * Jobs that entered `failed`, whatever moved them there, that this invocation claimed to publish as
   * JobsFailed (failures.ts): each failed job is claimed by one invocation at a time, and its claim ends
   * only once published. 0 until the reporter claims.
   */
  failedNew: number
  /**
   * Jobs that entered `failed` that no live invocation had claimed, as the last sweep read them (so its
   * own failures are in it; absent with metrics off): above 0, the reporter claims them.
   */
  failedPending?: number
  /** Duration of each sweep of this queue (ms). */
  durations: number[]
  /** Sizes seen by the last sweep. */
  counts?: SweepCounts
  /** Age of the oldest job waiting after the last sweep (ms). */
  oldestWaitAgeMs?: number
  error?: string
  /** The EchoMQError code of `error` (ERR_SCRIPT, ERR_OOM, ERR_NOPERM...). */
  errorCode?: string
  /** What to do about `error`, when the error says (EchoMQError.hint). */
  hint?: string
}

/** A queue before its first sweep. */
export const emptyRun = (): QueueRun => ({ marked: 0, recovered: 0, failed: 0, failedNew: 0, promoted: 0, trimmed: 0, durations: [] })

/**
 * Whether a queue's invocation is worth a log line of its own: a stall seen or recovered, a job failed, an
 * error, a worker function started. A queue that only had its counts read, or its routine promotions and
 * trims done, is in the summary's totals only, so the log does not grow with the queues that did nothing.
 */
export function eventful(run: QueueRun): boolean {
  return run.marked + run.recovered + run.failed + run.failedNew + (run.workersStarted ?? 0) > 0 || run.error !== undefined
}

/** The invocation over every queue: what the alarms watch and the summary log line shows. */
export interface Totals {
  queuesSwept: number
  sweepErrors: number
  marked: number
  recovered: number
  jobsFailed: number
  promoted: number
  trimmed: number
  /** Summed over the queues whose sizes were read; absent when none was. */
  counts?: { wait: number; active: number; delayed: number; failed: number }
  oldestWaitAgeMs?: number
  /** Per sweep, the slowest queue (ms). */
  sweepDurationsMs: number[]
}

/** A queue's wait age when known: an empty wait has none waiting (0); an unread age stays unknown. */
export function waitAge(run: QueueRun): number | undefined {
  return run.oldestWaitAgeMs ?? (run.counts?.wait === 0 ? 0 : undefined)
}

export function totals(runs: Record<string, QueueRun>, unregistered: ReadonlySet<string> = new Set()): Totals {
  const all = Object.values(runs)
  const sum = (f: (r: QueueRun) => number | undefined, list = all) => list.reduce((n, r) => n + (f(r) ?? 0), 0)
  const counted = all.filter((r) => r.counts)
  const ages = all.map(waitAge).filter((a): a is number => a !== undefined)
  const sweeps = Math.max(0, ...all.map((r) => r.durations.length))
  return {
    queuesSwept: Object.keys(runs).filter((q) => !unregistered.has(q)).length,
    sweepErrors: all.filter((r) => r.error !== undefined).length,
    marked: sum((r) => r.marked),
    recovered: sum((r) => r.recovered),
    jobsFailed: sum((r) => r.failedNew),
    promoted: sum((r) => r.promoted),
    trimmed: sum((r) => r.trimmed),
    ...(counted.length === 0
      ? {}
      : {
          counts: {
            wait: sum((r) => r.counts?.wait, counted),
            active: sum((r) => r.counts?.active, counted),
            delayed: sum((r) => r.counts?.delayed, counted),
            failed: sum((r) => r.counts?.failed, counted),
          },
        }),
    ...(ages.length === 0 ? {} : { oldestWaitAgeMs: Math.max(...ages) }),
    sweepDurationsMs: Array.from({ length: sweeps }, (_, i) => Math.max(...all.map((r) => r.durations[i] ?? 0))),
  }
}
