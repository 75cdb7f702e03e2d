/**
 * The Lambda event, parsed. A scheduled (EventBridge) event, known by its `source` or `detail-type`, sweeps
 * every queue; so does no event (`serverless invoke local` without `-d` passes an empty string). A manual
 * invocation may name the queues, `{ "queues": ["emails"] }`, and holds nothing else: a typo
 * (`{ "queue": ... }`) is refused with ERR_EVENT rather than sweeping every queue.
 */
import { EchoMQError } from '../errors.js'
import { validateQueueName } from '../options.js'
import { describe } from '../validate.js'

const FIELDS = ['queues'] as const

/** The known field a misspelt one was meant to be: at most two edits away (Levenshtein). */
function closest(key: string, known: readonly string[]): string | undefined {
  const distance = (a: string, b: string): number => {
    let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
    for (let i = 1; i <= a.length; i++) {
      const row = [i]
      for (let j = 1; j <= b.length; j++)
        row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1))
      prev = row
    }
    return prev[b.length] ?? 0
  }
  return known.find((k) => distance(key.toLowerCase(), k) <= 2)
}

/** The queues a manual event names; undefined for every queue. */
export function queuesFromEvent(event: unknown): string[] | undefined {
  if (event === undefined || event === null || event === '') return undefined
  if (typeof event !== 'object' || Array.isArray(event)) {
    throw new EchoMQError(
      'ERR_EVENT',
      `expected the event to be an object (a scheduled event or { "queues": [...] }), got: ${describe(event)}`,
    )
  }
  if ('source' in event || 'detail-type' in event) return undefined
  for (const key of Object.keys(event)) {
    if ((FIELDS as readonly string[]).includes(key)) continue
    const near = closest(key, FIELDS)
    throw new EchoMQError(
      'ERR_EVENT',
      `unknown event field "${key}"${near ? ` (did you mean "${near}"?)` : ''}; known fields: ${FIELDS.join(', ')} ` +
        '(a scheduled event sweeps every queue)',
    )
  }
  const queues = (event as { queues?: unknown }).queues
  if (queues === undefined) return undefined
  if (!Array.isArray(queues) || queues.length === 0) {
    throw new EchoMQError('ERR_EVENT', 'expected event.queues to be a non-empty array of queue names')
  }
  try {
    return queues.map((q) => validateQueueName(q))
  } catch (err) {
    throw new EchoMQError('ERR_EVENT', `event.queues: ${(err as Error).message}`)
  }
}
