/**
 * What one reaper invocation tells the operator, in this order:
 *
 * - the metrics (metrics.ts), between the claim of the failed jobs they count and its settlement
 *   (failures.ts): each job that entered `failed` is published once as JobsFailed, across overlapping
 *   invocations and failed publishes. With metrics off nothing is claimed: the count waits for a reaper
 *   that publishes it;
 * - one JSON line (message "queue") per queue where something happened (run.ts `eventful`: a stalled job
 *   marked or recovered, a job failed, a sweep error, a worker function started), with its figures and the
 *   first ids of the jobs recovered or failed, searchable with CloudWatch Logs Insights at no metric cost.
 *   `failedNew` is what this invocation published; `failedNotPublished` what it claimed but could not
 *   publish (given back for the next one). A queue that did nothing writes no line: the log grows with
 *   what happened, not with the number of queues (10,000 idle queues once wrote 5 MB an invocation);
 * - when no queue was swept, a warning saying why: the queues listed (QUEUES or the event) are not in the
 *   registry (a wrong PREFIX), another prefix's registry holds queues (a wrong PREFIX), or no registry
 *   exists yet (a fresh install: no Queue or Worker has run under the prefix). QueuesSwept = 0 goes out in
 *   the first two cases only, so the no-queues-swept alarm does not page before the first queue exists;
 * - one summary line (message "summary") with the totals, the queue with the oldest waiting job and the
 *   slowest queue (what the per-queue lines of idle queues used to be read for), how many queue lines went
 *   before it, and whether the metrics went out (`metricsPublished`, which the template's
 *   metrics-not-published alarm counts through a metric filter).
 *
 * The registry checks are best effort: a Redis user that may not run them gets a note, never a failed run.
 */
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch'
import type { RedisClient } from '../redis/connection.js'
import { registryKey } from '../redis/keys.js'
import { inRegistry, scanNodes, scanPage } from '../redis/queries.js'
import type { ReaperConfig } from './config.js'
import { FailureClaims } from './failures.js'
import type { Log } from './log.js'
import { metricsClient, type PublishResult, publishMetrics } from './metrics.js'
import { eventful, type QueueRun, type Totals, totals, waitAge } from './run.js'

/**
 * Reports each run of one reaper (a Lambda container, an `echomq sweep --every` process): the failed jobs
 * claimed, metrics, the claims settled, log lines. Keeps the CloudWatch client across runs.
 */
export class RunReporter {
  private cloudwatch: CloudWatchClient | undefined

  constructor(
    private readonly config: ReaperConfig,
    private readonly log: Log,
  ) {}

  /**
   * `listed`: the queues came from QUEUES or the event rather than the registry; `remainingMs`: a Lambda's
   * time left (how long its claims last). Never throws.
   */
  async report(
    client: RedisClient,
    sweeps: number,
    runs: Record<string, QueueRun>,
    listed: string[] | undefined,
    remainingMs?: () => number,
  ): Promise<Totals> {
    const { config, log } = this
    const claims = config.metricsMode === 'off' ? undefined : new FailureClaims(client, config.prefix, log)
    await claims?.claim(runs, remainingMs)
    const unregistered = listed ? await unregisteredQueues(client, config.prefix, Object.keys(runs), log) : new Set<string>()
    for (const queue of unregistered) {
      log('warn', `queue ${queue} is not in the registry ${registryKey(config.prefix)}: not counted as swept; is PREFIX right?`, { queue })
    }
    const t = totals(runs, unregistered)
    let freshInstall = false
    if (t.queuesSwept === 0) {
      const why = await whyNothingSwept(client, config.prefix, listed)
      freshInstall = why.reason === 'empty-registry'
      log('warn', why.message, {
        reason: why.reason,
        registry: why.registry,
        ...(why.otherPrefixes ? { otherPrefixes: why.otherPrefixes } : {}),
      })
    }
    if (config.metricsMode === 'api') this.cloudwatch ??= await metricsClient()
    const metrics = await publishMetrics(runs, {
      mode: config.metricsMode,
      namespace: config.namespace,
      service: config.service,
      perQueue: config.perQueueMetrics,
      unregistered,
      omitQueuesSwept: freshInstall,
      log,
      ...(this.cloudwatch ? { client: this.cloudwatch } : {}),
    })
    await claims?.settle(runs, metrics.jobsFailedPublished)
    let lines = 0
    for (const [queue, run] of Object.entries(runs)) {
      if (!eventful(run)) continue
      lines++
      log(run.error === undefined ? 'info' : 'warn', 'queue', queueLine(queue, run, metrics.jobsFailedPublished))
    }
    log('info', 'summary', summaryLine(sweeps, t, config, metrics, { ...standouts(runs), queueLines: lines }))
    return t
  }
}

/** A probe for other prefixes' registries reads at most this many SCAN pages of 1000 keys per node. */
const PROBE_PAGES = 10

/** The listed queues that are not in the registry `<prefix>:queues` (so not counted as swept). */
async function unregisteredQueues(client: RedisClient, prefix: string, queues: string[], log: Log): Promise<Set<string>> {
  if (queues.length === 0) return new Set()
  try {
    const member = await inRegistry(client, prefix, queues)
    return new Set(queues.filter((_, i) => !member[i]))
  } catch (err) {
    log('info', 'could not check the listed queues against the registry; counting them all as swept', {
      registry: registryKey(prefix),
      error: (err as Error).message,
    })
    return new Set()
  }
}

interface NothingSwept {
  reason: 'unregistered' | 'other-prefix' | 'empty-registry'
  message: string
  registry: string
  otherPrefixes?: string[]
}

/** Why an invocation swept no queue. `listed`: the queues came from QUEUES or the event, not the registry. */
async function whyNothingSwept(client: RedisClient, prefix: string, listed: string[] | undefined): Promise<NothingSwept> {
  const registry = registryKey(prefix)
  if (listed && listed.length > 0) {
    return {
      reason: 'unregistered',
      registry,
      message: `no queue swept: none of the listed queues (${listed.join(', ')}) is in the registry ${registry}; is PREFIX right?`,
    }
  }
  const others = (await otherRegistries(client, prefix)).sort()
  if (others.length > 0) {
    return {
      reason: 'other-prefix',
      registry,
      otherPrefixes: others,
      message:
        `no queue swept: the registry ${registry} is empty, but ${others.map((p) => registryKey(p)).join(', ')} ` +
        'holds queues; is PREFIX right?',
    }
  }
  return {
    reason: 'empty-registry',
    registry,
    message:
      `no queue swept: the registry ${registry} is empty and no other prefix's registry was found; ` +
      'no Queue or Worker has run under this prefix yet, or PREFIX is wrong',
  }
}

/** Prefixes of other non-empty registries, from a bounded SCAN (every master of a cluster). */
async function otherRegistries(client: RedisClient, prefix: string): Promise<string[]> {
  const suffix = registryKey('')
  const found = new Set<string>()
  try {
    for (const node of scanNodes(client)) {
      let cursor = '0'
      for (let page = 0; page < PROBE_PAGES; page++) {
        const [next, keys] = await scanPage(node, cursor, registryKey('*'), 'set', 1000)
        for (const key of keys) if (key !== registryKey(prefix)) found.add(key.slice(0, -suffix.length))
        cursor = next
        if (cursor === '0') break
      }
    }
  } catch {
    // A user without SCAN: the warning then names the empty registry only.
  }
  return [...found]
}

/** The "queue" log line, for a queue where something happened. `published`: JobsFailed went out. */
function queueLine(queue: string, run: QueueRun, published = true): object {
  return {
    queue,
    sweeps: run.durations.length,
    marked: run.marked,
    recovered: run.recovered,
    failed: run.failed,
    ...(run.recoveredIds ? { recoveredIds: run.recoveredIds } : {}),
    ...(run.failedIds ? { failedIds: run.failedIds } : {}),
    failedNew: published ? run.failedNew : 0,
    ...(published || run.failedNew === 0 ? {} : { failedNotPublished: run.failedNew }),
    ...(run.workersStarted ? { workersStarted: run.workersStarted, ...(run.backlog ? { ready: run.backlog.ready } : {}) } : {}),
    ...(run.counts ? { counts: run.counts } : {}),
    ...(run.oldestWaitAgeMs === undefined ? {} : { oldestWaitAgeMs: run.oldestWaitAgeMs }),
    ...(run.durations.length > 0 ? { slowestSweepMs: Math.max(...run.durations) } : {}),
    ...(run.error === undefined ? {} : { error: run.error, errorCode: run.errorCode ?? 'unknown' }),
    ...(run.hint === undefined ? {} : { hint: run.hint }),
  }
}

/** The queues that stand out of an invocation, with no line of their own: the oldest wait, the slowest sweep. */
interface Standouts {
  oldestWaitQueue?: string
  slowestQueue?: string
  slowestSweepMs?: number
  /** Queue lines written before the summary. */
  queueLines: number
}

function standouts(runs: Record<string, QueueRun>): Omit<Standouts, 'queueLines'> {
  let oldest: [string, number] | undefined
  let slowest: [string, number] | undefined
  for (const [queue, run] of Object.entries(runs)) {
    const age = waitAge(run)
    if (age !== undefined && age > 0 && (!oldest || age > oldest[1])) oldest = [queue, age]
    for (const ms of run.durations) if (!slowest || ms > slowest[1]) slowest = [queue, ms]
  }
  return {
    ...(oldest ? { oldestWaitQueue: oldest[0] } : {}),
    ...(slowest ? { slowestQueue: slowest[0], slowestSweepMs: slowest[1] } : {}),
  }
}

/** The "summary" log line: the totals, the queues that stand out, and whether the metrics went out. */
function summaryLine(
  sweeps: number,
  t: Totals,
  config: Pick<ReaperConfig, 'metricsMode' | 'namespace'>,
  metrics: PublishResult,
  s: Standouts,
): object {
  const pending = metrics.jobsFailedPublished ? 0 : t.jobsFailed
  return {
    sweeps,
    queuesSwept: t.queuesSwept,
    queueLines: s.queueLines,
    sweepErrors: t.sweepErrors,
    marked: t.marked,
    recovered: t.recovered,
    jobsFailed: t.jobsFailed - pending,
    ...(pending > 0 ? { jobsFailedNotPublished: pending } : {}),
    promoted: t.promoted,
    trimmed: t.trimmed,
    ...(t.counts ? { counts: t.counts } : {}),
    ...(t.oldestWaitAgeMs === undefined ? {} : { oldestWaitAgeMs: t.oldestWaitAgeMs }),
    ...(s.oldestWaitQueue === undefined ? {} : { oldestWaitQueue: s.oldestWaitQueue }),
    ...(s.slowestQueue === undefined ? {} : { slowestQueue: s.slowestQueue, slowestSweepMs: s.slowestSweepMs }),
    metrics: config.metricsMode,
    ...(config.metricsMode === 'off' ? {} : { namespace: config.namespace, metricsPublished: metrics.published }),
  }
}
