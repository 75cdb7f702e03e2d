/**
 * The jobs the cost bench runs, the same on both libraries: each scenario's adds (in addBulk chunks) and a
 * processor made fresh per run.
 */
import { payload } from './util.js'

interface BulkJob {
  name: string
  data: unknown
  opts?: Record<string, unknown>
}

export interface Scenario {
  name: string
  chunks(n: number): BulkJob[][]
  /** A processor for one run (state such as "already failed once" must not leak between runs). */
  processor: () => (job: { id?: string | undefined }) => Promise<unknown>
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
]
