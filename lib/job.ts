/** A job as stored in its hash, the conversion from the hash's fields, and a queue's job counts. */
export type JobState = 'wait' | 'delayed' | 'active' | 'completed' | 'failed'

export const JOB_STATES: readonly JobState[] = ['wait', 'delayed', 'active', 'completed', 'failed']

/** A queue's job counts; `wait` includes the jobs busy workers reserved for their next calls. */
export interface QueueCounts {
  wait: number
  active: number
  /** Jobs in `active` that a sweep has marked (they are counted in `active` too). */
  stalled: number
  delayed: number
  completed: number
  failed: number
}

export interface Job<Data = unknown, Result = unknown> {
  id: string
  name: string
  data: Data
  /** Total starts allowed. */
  attempts: number
  /** Attempts used: runs that completed, failed or stalled. A run returned by a closing worker uses none. */
  attemptsMade: number
  /** Times a worker took the job (all runs, including those before a retry from `failed`). */
  attemptsStarted: number
  state: JobState
  failedReason?: string
  /** Error of the last attempt that did not succeed (kept when a failed job is retried). */
  lastError?: string
  returnValue?: Result
  /** ms, Redis's clock. */
  createdOn: number
  startedOn?: number
  finishedOn?: number
  /** When a delayed job (or a retry in backoff) is due (ms, Redis's clock). */
  dueAt?: number
  /** The `name` of the worker that took the job last. */
  workerName?: string
  /** Times the job was sent back from `failed` by retryJobs. */
  retried?: number
}

function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const optionalNumber = (v: string | undefined) => (v === undefined ? undefined : Number(v))

/** Builds a Job from HGETALL output (an object, or the flat field/value list a script returns). */
export function jobFromHash(id: string, hash: Record<string, string> | string[]): Job {
  const h: Record<string, string> = {}
  if (Array.isArray(hash)) {
    for (let i = 0; i + 1 < hash.length; i += 2) h[hash[i] as string] = hash[i + 1] as string
  } else Object.assign(h, hash)
  const job: Job = {
    id,
    name: h.name ?? '',
    data: parseJson(h.data),
    attempts: Number(h.attempts ?? 1),
    attemptsMade: Number(h.attemptsMade ?? 0),
    attemptsStarted: Number(h.attemptsStarted ?? 0),
    state: (h.state ?? 'wait') as JobState,
    createdOn: Number(h.createdOn ?? 0),
  }
  if (h.failedReason !== undefined) job.failedReason = h.failedReason
  if (h.lastError !== undefined) job.lastError = h.lastError
  if (h.returnValue !== undefined) job.returnValue = parseJson(h.returnValue)
  const startedOn = optionalNumber(h.startedOn)
  if (startedOn !== undefined) job.startedOn = startedOn
  const finishedOn = optionalNumber(h.finishedOn)
  if (finishedOn !== undefined) job.finishedOn = finishedOn
  const dueAt = optionalNumber(h.dueAt)
  if (dueAt !== undefined && job.state === 'delayed') job.dueAt = dueAt
  if (h.workerName !== undefined) job.workerName = h.workerName
  const retried = optionalNumber(h.retried)
  if (retried !== undefined) job.retried = retried
  return job
}

/**
 * Builds a Job just taken from takeJobs.lua's reply: an HMGET in its JOB_FIELDS order (name, data,
 * attempts, attemptsMade, attemptsStarted, createdOn, lastError, retried; null for a field the hash lacks),
 * and what the take set (active, since `startedOn`, by `workerName`). Decoded without a detour through an
 * object, as a busy worker does this for every job.
 */
export function jobFromFields(id: string, f: (string | null)[], startedOn: string, workerName: string): Job {
  const job: Job = {
    id,
    name: f[0] ?? '',
    data: parseJson(f[1] ?? undefined),
    attempts: f[2] == null ? 1 : Number(f[2]),
    attemptsMade: f[3] == null ? 0 : Number(f[3]),
    attemptsStarted: f[4] == null ? 0 : Number(f[4]),
    state: 'active',
    createdOn: f[5] == null ? 0 : Number(f[5]),
    startedOn: Number(startedOn),
    workerName,
  }
  if (f[6] != null) job.lastError = f[6]
  if (f[7] != null) job.retried = Number(f[7])
  return job
}
