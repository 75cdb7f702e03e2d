/**
 * A worker function's event: `{ queue?, maxJobs?, invocation? }` (what the reaper sends when it starts one:
 * `invocation` is the id it entered the invocation under; or a manual invocation), nothing at all, or a
 * scheduled (EventBridge) event, known by its `source` or `detail-type`, which drains the handler's own
 * queue. `queue`, when given, must be the handler's own. Anything else is refused with ERR_EVENT, before any
 * Redis call: a typo (`{ "queues": ... }`) must not silently drain another queue or none.
 */
import { EchoMQError } from '../errors.js'
import { validateQueueName } from '../options.js'
import { describe } from '../validate.js'
import { MAX_JOBS_MAX } from './options.js'

export interface WorkerEvent {
  queue?: string
  maxJobs?: number
  /** The id the reaper entered this invocation under (lib/reaper/scaling.ts): the function renews that entry. */
  invocation?: string
}

const FIELDS = ['queue', 'maxJobs', 'invocation'] as const
const INVOCATION_ID = /^[A-Za-z0-9._:-]{1,128}$/

export function parseWorkerEvent(event: unknown, ownQueue: string): WorkerEvent {
  if (event === undefined || event === null || event === '') return {}
  if (typeof event !== 'object' || Array.isArray(event)) {
    throw new EchoMQError(
      'ERR_EVENT',
      `expected the event to be an object ({ "queue"?, "maxJobs"? } or a scheduled event), got: ${describe(event)}`,
    )
  }
  if ('source' in event || 'detail-type' in event) return {}
  const fields = event as Record<string, unknown>
  for (const key of Object.keys(fields)) {
    if (!(FIELDS as readonly string[]).includes(key)) {
      throw new EchoMQError('ERR_EVENT', `unknown event field "${key}"; known fields: ${FIELDS.join(', ')}`)
    }
  }
  const parsed: WorkerEvent = {}
  if (fields.queue !== undefined) {
    try {
      parsed.queue = validateQueueName(fields.queue)
    } catch (err) {
      throw new EchoMQError('ERR_EVENT', `event.queue: ${(err as Error).message}`)
    }
    // The processor was written for one queue: run by another, it would complete that queue's jobs with the wrong code.
    if (parsed.queue !== ownQueue) {
      throw new EchoMQError(
        'ERR_EVENT',
        `event.queue is "${parsed.queue}", but this worker function runs queue "${ownQueue}" (the queue given to createWorkerHandler)`,
        { hint: 'check the function named for that queue in WORKER_FUNCTIONS, or leave event.queue out' },
      )
    }
  }
  const maxJobs = fields.maxJobs
  if (maxJobs !== undefined) {
    if (typeof maxJobs !== 'number' || !Number.isInteger(maxJobs) || maxJobs < 1 || maxJobs > MAX_JOBS_MAX) {
      throw new EchoMQError('ERR_EVENT', `expected event.maxJobs to be an integer from 1 to ${MAX_JOBS_MAX}, got: ${describe(maxJobs)}`)
    }
    parsed.maxJobs = maxJobs
  }
  const id = fields.invocation
  if (id !== undefined) {
    if (typeof id !== 'string' || !INVOCATION_ID.test(id)) {
      throw new EchoMQError(
        'ERR_EVENT',
        `expected event.invocation to be an id of 1-128 characters from [A-Za-z0-9._:-], got: ${describe(id)}`,
      )
    }
    parsed.invocation = id
  }
  return parsed
}
