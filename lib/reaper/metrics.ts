/**
 * The reaper's CloudWatch metrics, built from one invocation's sweeps. Names come from metric-names.json,
 * which serverless.yml reads too, so alarms and code cannot drift apart.
 *
 * By default only totals over every queue are published, without dimensions, so the number of custom
 * metrics (what CloudWatch bills) stays at 12 however many queues there are:
 *   SweepRuns         1 per invocation that swept (the dead-man signal)
 *   QueuesSwept       queues swept (a queue listed in QUEUES but absent from the registry is not counted; left
 *                     out on a fresh install, when no registry exists under any prefix)
 *   SweepErrors       queues whose sweep failed in the invocation
 *   StalledMarked, StalledRecovered
 *   JobsFailed        jobs that entered `failed` since they were last published, whatever moved them there
 *                     (QueueRun.failedNew: what this invocation claimed, failures.ts; its claims are settled
 *                     as published once the call carrying this total went through, the first call)
 *   WaitingCount, ActiveCount, DelayedCount, FailedCount   sizes after the last sweep
 *   OldestWaitAge     ms, the oldest job waiting in any queue (like SQS's ApproximateAgeOfOldestMessage)
 *   SweepDuration     ms, the slowest queue of each sweep (one value per sweep)
 * With `perQueue`, each queue also gets its own figures (dimension Queue): 10 more metrics per queue.
 * Per-queue figures are in the reaper's log for each queue where something happened (report.ts).
 *
 * Modes: `api` sends PutMetricData (at most 1000 metrics a call, chunked), bounded by PUBLISH_TIMEOUT_MS
 * in all; `emf` writes CloudWatch Embedded Metric Format lines to stdout (no network call: what a function
 * in a VPC without a route to the CloudWatch API needs); `off`. A failure to publish is logged with the
 * error's name, HTTP status and request id, and never fails the sweep.
 */
import type { CloudWatchClient, MetricDatum, StandardUnit } from '@aws-sdk/client-cloudwatch'
import { type AwsErrorDescription, boundedClientOptions, describeAwsError, isTimeout } from './aws.js'
import type { Log } from './log.js'
import names from './metric-names.json' with { type: 'json' }
import { withPeers } from './peers.js'
import { type QueueRun, totals, waitAge } from './run.js'

export const METRIC_NAMES = names
export const MAX_METRICS_PER_CALL = 1000
/** CloudWatch accepts at most 150 values in one datum, EMF at most 100 per metric. */
const MAX_VALUES = 100
/** Every PutMetricData call of an invocation together: a function without a route to CloudWatch loses this much, no more. */
export const PUBLISH_TIMEOUT_MS = 2_000

interface Sample {
  name: string
  unit: StandardUnit
  queue?: string
  values: number[]
}

interface MetricOptions {
  /** Also each queue's figures, with dimension Queue. */
  perQueue?: boolean
  /** Queues listed (QUEUES or the event) but not in the registry: swept, not counted in QueuesSwept. */
  unregistered?: ReadonlySet<string>
  /** A fresh install (no registry under the prefix, none under another): no QueuesSwept, so no page before a queue exists. */
  omitQueuesSwept?: boolean
}

function samples(runs: Record<string, QueueRun>, options: MetricOptions): Sample[] {
  const t = totals(runs, options.unregistered)
  const out: Sample[] = []
  const add = (name: string, values: number[], queue?: string, unit: StandardUnit = 'Count') =>
    values.length > 0 && out.push({ name, unit, values: values.slice(-MAX_VALUES), ...(queue === undefined ? {} : { queue }) })
  add(names.SweepRuns, [1])
  if (!options.omitQueuesSwept) add(names.QueuesSwept, [t.queuesSwept])
  add(names.SweepErrors, [t.sweepErrors])
  add(names.StalledMarked, [t.marked])
  add(names.StalledRecovered, [t.recovered])
  add(names.JobsFailed, [t.jobsFailed])
  if (t.counts) {
    add(names.WaitingCount, [t.counts.wait])
    add(names.ActiveCount, [t.counts.active])
    add(names.DelayedCount, [t.counts.delayed])
    add(names.FailedCount, [t.counts.failed])
  }
  if (t.oldestWaitAgeMs !== undefined) add(names.OldestWaitAge, [t.oldestWaitAgeMs], undefined, 'Milliseconds')
  add(names.SweepDuration, t.sweepDurationsMs, undefined, 'Milliseconds')
  if (!options.perQueue) return out
  for (const [queue, run] of Object.entries(runs)) {
    add(names.StalledMarked, [run.marked], queue)
    add(names.StalledRecovered, [run.recovered], queue)
    add(names.JobsFailed, [run.failedNew ?? 0], queue)
    add(names.SweepErrors, [run.error === undefined ? 0 : 1], queue)
    if (run.counts) {
      add(names.WaitingCount, [run.counts.wait], queue)
      add(names.ActiveCount, [run.counts.active], queue)
      add(names.DelayedCount, [run.counts.delayed ?? 0], queue)
      add(names.FailedCount, [run.counts.failed], queue)
    }
    const age = waitAge(run)
    if (age !== undefined) add(names.OldestWaitAge, [age], queue, 'Milliseconds')
    add(names.SweepDuration, run.durations, queue, 'Milliseconds')
  }
  return out
}

function metricData(runs: Record<string, QueueRun>, timestamp: Date, options: MetricOptions = {}): MetricDatum[] {
  return samples(runs, options).map((s) => ({
    MetricName: s.name,
    Timestamp: timestamp,
    Unit: s.unit,
    ...(s.queue === undefined ? {} : { Dimensions: [{ Name: names.dimension, Value: s.queue }] }),
    ...(s.values.length === 1 ? { Value: s.values[0] } : { Values: s.values }),
  }))
}

export interface EmfOptions extends MetricOptions {
  namespace: string
  timestamp: Date
  /** POWERTOOLS_SERVICE_NAME: a property of each document (searchable), not a dimension. */
  service?: string | undefined
}

/** One EMF document for the totals (no dimensions) and, with perQueue, one per queue. */
export function emfDocuments(runs: Record<string, QueueRun>, options: EmfOptions): object[] {
  const groups = new Map<string | undefined, Sample[]>()
  for (const s of samples(runs, options)) groups.set(s.queue, [...(groups.get(s.queue) ?? []), s])
  return [...groups].map(([queue, list]) => ({
    _aws: {
      Timestamp: options.timestamp.getTime(),
      CloudWatchMetrics: [
        {
          Namespace: options.namespace,
          Dimensions: [queue === undefined ? [] : [names.dimension]],
          Metrics: list.map((s) => ({ Name: s.name, Unit: s.unit })),
        },
      ],
    },
    ...(options.service === undefined ? {} : { service: options.service }),
    ...(queue === undefined ? {} : { [names.dimension]: queue }),
    ...Object.fromEntries(list.map((s) => [s.name, s.values.length === 1 ? s.values[0] : s.values])),
  }))
}

/**
 * The CloudWatch SDK, loaded only when metrics go out through the API: `echomq sweep --metrics off` (or
 * emf) runs without the optional peer installed.
 */
const cloudwatchSdk = () =>
  withPeers('publishing metrics (metricsMode api)', () => import('@aws-sdk/client-cloudwatch'), ['@aws-sdk/client-cloudwatch'])

/** A CloudWatch client whose calls cannot outlast PUBLISH_TIMEOUT_MS. */
export async function metricsClient(): Promise<CloudWatchClient> {
  const { CloudWatchClient } = await cloudwatchSdk()
  return new CloudWatchClient(boundedClientOptions(PUBLISH_TIMEOUT_MS))
}

export interface PublishOptions extends MetricOptions {
  mode: 'api' | 'emf' | 'off'
  namespace: string
  service?: string | undefined
  client?: CloudWatchClient
  log: Log
  write?: (line: string) => void
  now?: Date
  timeoutMs?: number
}

export interface PublishResult {
  /** PutMetricData calls made (api mode). */
  calls: number
  /** False when a call failed; `error` then says why. */
  published: boolean
  /**
   * The JobsFailed total reached CloudWatch (or its EMF line was written): it goes with the totals, in the
   * first call, so a later call's failure (per-queue figures) does not make the claimed jobs unpublished.
   */
  jobsFailedPublished: boolean
  error?: AwsErrorDescription
}

/** Publishes; never throws. */
export async function publishMetrics(runs: Record<string, QueueRun>, options: PublishOptions): Promise<PublishResult> {
  const timestamp = options.now ?? new Date()
  if (options.mode === 'off') return { calls: 0, published: false, jobsFailedPublished: false }
  if (options.mode === 'emf') {
    const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`))
    for (const doc of emfDocuments(runs, { ...options, timestamp })) write(JSON.stringify(doc))
    return { calls: 0, published: true, jobsFailedPublished: true }
  }
  const client = options.client ?? (await metricsClient())
  const { PutMetricDataCommand } = await cloudwatchSdk()
  const data = metricData(runs, timestamp, options)
  const timeoutMs = options.timeoutMs ?? PUBLISH_TIMEOUT_MS
  // One deadline for every chunk: the publish as a whole is bounded, not each call.
  const abortSignal = AbortSignal.timeout(timeoutMs)
  let calls = 0
  for (let i = 0; i < data.length; i += MAX_METRICS_PER_CALL) {
    try {
      calls++
      await client.send(new PutMetricDataCommand({ Namespace: options.namespace, MetricData: data.slice(i, i + MAX_METRICS_PER_CALL) }), {
        abortSignal,
      })
    } catch (err) {
      const error = describeAwsError(err)
      options.log('error', 'metrics not published; the sweep itself is unaffected', {
        namespace: options.namespace,
        ...error,
        ...(isTimeout(err)
          ? { timeoutMs, hint: 'no route to the CloudWatch API? in a VPC, use metricsMode=emf, a NAT gateway or a monitoring endpoint' }
          : {}),
      })
      // The totals, JobsFailed's among them, lead the data (samples): the first call carried them.
      return { calls, published: false, jobsFailedPublished: i > 0, error }
    }
  }
  return { calls, published: true, jobsFailedPublished: true }
}
