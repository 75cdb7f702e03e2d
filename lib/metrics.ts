/**
 * The reaper's CloudWatch metrics, built from one invocation's sweeps. Names come from metric-names.json,
 * which serverless.yml reads too, so alarms and code cannot drift apart.
 *
 * Per queue (dimension Queue): StalledMarked, StalledRecovered, JobsFailed (moved to failed by the sweeps),
 * FailedCount, WaitingCount, ActiveCount (sizes after the last sweep), SweepDuration (ms, one value per
 * sweep). Without dimensions: SweepRuns = 1 per invocation (the dead-man signal), and JobsFailed and
 * FailedCount summed over the queues (what the alarms watch).
 *
 * Modes: `api` sends PutMetricData (at most 1000 metrics a call; more are sent in chunks), `emf` writes
 * CloudWatch Embedded Metric Format lines to stdout (for a function in a VPC without a route to the
 * CloudWatch API), `off`. A failure to publish is logged and never fails the sweep.
 */
import { CloudWatchClient, type MetricDatum, PutMetricDataCommand, type StandardUnit } from '@aws-sdk/client-cloudwatch'
import type { QueueCounts } from './commands.js'
import names from './metric-names.json' with { type: 'json' }

export const METRIC_NAMES = names
export const MAX_METRICS_PER_CALL = 1000
/** CloudWatch accepts at most 150 values in one datum. */
const MAX_VALUES_PER_DATUM = 150
const PUBLISH_TIMEOUT_MS = 5_000

export interface QueueRun {
  marked: number
  recovered: number
  /** Moved to failed by the sweeps (a stall on the last attempt). */
  failed: number
  /** Every job that entered `failed` since it was last counted, whatever moved it there (exactly once). */
  failedNew: number
  /** Duration of each sweep of this queue (ms). */
  durations: number[]
  /** Sizes seen by the last sweep. */
  counts?: QueueCounts
  /** How long the job next in line in `wait` has waited (ms), at the last sweep. */
  oldestWaitAgeMs?: number
  error?: string
  /** The EchoMQError code of `error`. */
  errorCode?: string
}

interface Sample {
  name: string
  unit: StandardUnit
  queue?: string
  values: number[]
}

function samples(runs: Record<string, QueueRun>): Sample[] {
  const all = Object.values(runs)
  // Totals without dimensions feed the alarms, which cannot sum a metric over every queue.
  const out: Sample[] = [
    { name: names.SweepRuns, unit: 'Count', values: [1] },
    { name: names.JobsFailed, unit: 'Count', values: [all.reduce((n, r) => n + r.failed, 0)] },
  ]
  if (all.some((r) => r.counts)) {
    out.push({ name: names.FailedCount, unit: 'Count', values: [all.reduce((n, r) => n + (r.counts?.failed ?? 0), 0)] })
  }
  for (const [queue, run] of Object.entries(runs)) {
    const add = (name: string, values: number[], unit: StandardUnit = 'Count') => out.push({ name, unit, queue, values })
    add(names.StalledMarked, [run.marked])
    add(names.StalledRecovered, [run.recovered])
    add(names.JobsFailed, [run.failed])
    if (run.counts) {
      add(names.FailedCount, [run.counts.failed])
      add(names.WaitingCount, [run.counts.wait])
      add(names.ActiveCount, [run.counts.active])
    }
    if (run.durations.length > 0) add(names.SweepDuration, run.durations.slice(-MAX_VALUES_PER_DATUM), 'Milliseconds')
  }
  return out
}

export function metricData(runs: Record<string, QueueRun>, timestamp: Date): MetricDatum[] {
  return samples(runs).map((s) => ({
    MetricName: s.name,
    Timestamp: timestamp,
    Unit: s.unit,
    ...(s.queue === undefined ? {} : { Dimensions: [{ Name: names.dimension, Value: s.queue }] }),
    ...(s.values.length === 1 ? { Value: s.values[0] } : { Values: s.values }),
  }))
}

/** One EMF document per queue, and one for SweepRuns without dimensions. */
export function emfDocuments(runs: Record<string, QueueRun>, namespace: string, timestamp: Date): object[] {
  const groups = new Map<string | undefined, Sample[]>()
  for (const s of samples(runs)) groups.set(s.queue, [...(groups.get(s.queue) ?? []), s])
  return [...groups].map(([queue, list]) => ({
    _aws: {
      Timestamp: timestamp.getTime(),
      CloudWatchMetrics: [
        {
          Namespace: namespace,
          Dimensions: [queue === undefined ? [] : [names.dimension]],
          Metrics: list.map((s) => ({ Name: s.name, Unit: s.unit })),
        },
      ],
    },
    ...(queue === undefined ? {} : { [names.dimension]: queue }),
    ...Object.fromEntries(list.map((s) => [s.name, s.values.length === 1 ? s.values[0] : s.values])),
  }))
}

export interface PublishOptions {
  mode: 'api' | 'emf' | 'off'
  namespace: string
  client?: CloudWatchClient
  log: (level: 'info' | 'warn' | 'error', message: string, fields?: object) => void
  write?: (line: string) => void
  now?: Date
}

/** Publishes; never throws. Returns the number of PutMetricData calls made. */
export async function publishMetrics(runs: Record<string, QueueRun>, options: PublishOptions): Promise<number> {
  const timestamp = options.now ?? new Date()
  if (options.mode === 'off') return 0
  if (options.mode === 'emf') {
    const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`))
    for (const doc of emfDocuments(runs, options.namespace, timestamp)) write(JSON.stringify(doc))
    return 0
  }
  const client = options.client ?? new CloudWatchClient({})
  const data = metricData(runs, timestamp)
  let calls = 0
  for (let i = 0; i < data.length; i += MAX_METRICS_PER_CALL) {
    try {
      calls++
      await client.send(new PutMetricDataCommand({ Namespace: options.namespace, MetricData: data.slice(i, i + MAX_METRICS_PER_CALL) }), {
        abortSignal: AbortSignal.timeout(PUBLISH_TIMEOUT_MS),
      })
    } catch (err) {
      options.log('error', 'metrics not published; the sweep itself is unaffected', { error: (err as Error).message ?? String(err) })
      return calls
    }
  }
  return calls
}
