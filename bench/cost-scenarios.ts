/**
 * The jobs the cost bench runs, the same on both libraries: each scenario's adds (in addBulk chunks, or
 * flows for FlowProducer.addBulk) and a processor made fresh per run.
 */
import { payload } from './util.js'

export interface BulkJob {
  name: string
  data: unknown
  opts?: Record<string, unknown>
}

/** A flow as both FlowProducers take it: a parent and its children, all on the bench's queue. */
export interface FlowSpec {
  name: string
  queueName: string
  data: unknown
  children: { name: string; queueName: string; data: unknown }[]
}

export interface Scenario {
  name: string
  /** The adds of n units, in addBulk calls (empty for a flow scenario). */
  chunks(n: number): BulkJob[][]
  /** A processor for one run (state such as "already failed once" must not leak between runs). */
  processor: () => (job: { id?: string | undefined }) => Promise<unknown>
  /** Jobs that complete for n units (a deduplicated add runs no job of its own); n by default. */
  completions?: (n: number) => number
  /** The flows of n units, in FlowProducer.addBulk calls: set for a flow scenario. */
  flows?: (n: number, queueName: string) => FlowSpec[][]
  /**
   * How EchoMQ runs the jobs: a long-running Worker (the default), or 'function': the worker handler
   * (echomq/lambda createWorkerHandler) invoked as the reaper invokes it. BullMQ has no such thing: its side
   * is its plain Worker.
   */
  emqRunner?: 'worker' | 'function'
  /** The worker function's concurrency: the stack's default (10) unless set. */
  functionConcurrency?: number
}

const CHUNK = 1000

function chunked(n: number, job: (i: number) => BulkJob): BulkJob[][] {
  const out: BulkJob[][] = []
  for (let i = 0; i < n; i += CHUNK) out.push(Array.from({ length: Math.min(CHUNK, n - i) }, (_, k) => job(i + k)))
  return out
}

const noop = () => async () => 'ok'

/** Fails each job's first attempt: the retried scenario's second attempt completes. */
const failOnce = () => {
  const seen = new Set<string | undefined>()
  return async (job: { id?: string | undefined }) => {
    if (seen.has(job.id)) return 'ok'
    seen.add(job.id)
    throw new Error('first attempt fails')
  }
}

/** Children per flow: a flow is its parent and these, 11 jobs. */
export const FLOW_CHILDREN = 10
const FLOW_JOBS = FLOW_CHILDREN + 1
/** Flows per FlowProducer.addBulk call (990 jobs, as near the other scenarios' 1,000 as 11 allows). */
const FLOWS_PER_CALL = 90

/** Units of the flow scenario are jobs: n jobs are floor(n / 11) flows. */
const flowCount = (n: number) => Math.max(1, Math.floor(n / FLOW_JOBS))

function flows(n: number, queueName: string): FlowSpec[][] {
  const out: FlowSpec[][] = []
  const count = flowCount(n)
  for (let f = 0; f < count; f += FLOWS_PER_CALL) {
    out.push(
      Array.from({ length: Math.min(FLOWS_PER_CALL, count - f) }, (_, k) => ({
        name: 'parent',
        queueName,
        data: { f: f + k },
        children: Array.from({ length: FLOW_CHILDREN }, (_, c) => ({ name: 'child', queueName, data: { f: f + k, c } })),
      })),
    )
  }
  return out
}

export const COST_SCENARIOS: Scenario[] = [
  { name: 'plain', chunks: (n) => chunked(n, (i) => ({ name: 'job', data: { i } })), processor: noop },
  { name: 'payload-1k', chunks: (n) => chunked(n, (i) => ({ name: 'job', data: payload(i, 1024) })), processor: noop },
  {
    name: 'prioritized',
    chunks: (n) => chunked(n, (i) => ({ name: 'job', data: { i }, opts: { priority: 1 + (i % 10) } })),
    processor: noop,
  },
  { name: 'delayed', chunks: (n) => chunked(n, (i) => ({ name: 'job', data: { i }, opts: { delay: 100 } })), processor: noop },
  {
    name: 'retried-once',
    chunks: (n) => chunked(n, (i) => ({ name: 'job', data: { i }, opts: { attempts: 2 } })),
    processor: failOnce,
  },
  {
    // n adds with `deduplication: { id }`: the first n/2 each hold a new id, the last n/2 repeat them (in later
    // addBulk calls, while the holders still wait), so half the adds are duplicates and n/2 jobs run. Per add.
    name: 'deduplicated',
    chunks: (n) => chunked(n, (i) => ({ name: 'job', data: { i }, opts: { deduplication: { id: `d${i % Math.ceil(n / 2)}` } } })),
    processor: noop,
    completions: (n) => Math.ceil(n / 2),
  },
  { name: 'function', chunks: (n) => chunked(n, (i) => ({ name: 'job', data: { i } })), processor: noop, emqRunner: 'function' },
  {
    // The same at BullMQ's Worker's concurrency in this bench (50): what the stack's default of 10 costs.
    name: 'function-c50',
    chunks: (n) => chunked(n, (i) => ({ name: 'job', data: { i } })),
    processor: noop,
    emqRunner: 'function',
    functionConcurrency: 50,
  },
  { name: 'flow', chunks: () => [], flows, processor: noop, completions: (n) => flowCount(n) * FLOW_JOBS },
]

/** Scenarios run unless --only names others: all of them. */
export const DEFAULT_SCENARIOS = COST_SCENARIOS.map((s) => s.name)
