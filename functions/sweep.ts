/**
 * The scheduled reaper, kept thin: read the event, run the library's reaper (lib/reaper/reaper.ts), return its
 * summary. The reaper, with its configuration (the Redis URL read from SSM at the cold start, see
 * lib/reaper/secrets.ts) and its Redis and CloudWatch clients, is created once per container and reused by warm
 * invocations. A connection failure drops it, so the next invocation reads the URL again: a rotated
 * password or a moved endpoint is picked up without a redeploy.
 */
import type { Context } from 'aws-lambda'
import { EchoMQError } from '../lib/errors.js'
import { validateQueueName } from '../lib/options.js'
import { loadReaperConfig } from '../lib/reaper/config.js'
import { createReaper, type Log, type Reaper, type ReaperSummary } from '../lib/reaper/reaper.js'
import { readSecret } from '../lib/reaper/secrets.js'
import { checkKnown } from '../lib/validate.js'

export type { ReaperSummary }

const jsonLog: Log = (level, message, fields = {}) => {
  const line = JSON.stringify({ level, message, ...fields })
  if (level === 'error') console.error(line)
  else console.log(line)
}

/**
 * A manual invocation may name the queues: `{ "queues": ["emails"] }`; it holds nothing else, so a typo
 * (`{ "queue": ... }`) is refused rather than sweeping every queue. A scheduled (EventBridge) event, known
 * by its `source` or `detail-type`, sweeps every queue. `serverless invoke local` without `-d` passes an
 * empty string: no event.
 */
function queuesFromEvent(event: unknown): string[] | undefined {
  if (event === undefined || event === null || event === '') return undefined
  if (typeof event !== 'object' || Array.isArray(event)) {
    throw new EchoMQError(
      'ERR_EVENT',
      `expected the event to be an object (a scheduled event or { "queues": [...] }), got: ${JSON.stringify(event)}`,
    )
  }
  if ('source' in event || 'detail-type' in event) return undefined
  try {
    checkKnown('event', event, ['queues'])
  } catch (err) {
    throw new EchoMQError('ERR_EVENT', `${(err as Error).message.replace(/option/g, 'field')} (a scheduled event sweeps every queue)`)
  }
  const queues = (event as { queues?: unknown }).queues
  if (queues === undefined) return undefined
  if (!Array.isArray(queues) || queues.length === 0)
    throw new EchoMQError('ERR_EVENT', 'expected event.queues to be a non-empty array of queue names')
  try {
    return queues.map((q) => validateQueueName(q))
  } catch (err) {
    throw new EchoMQError('ERR_EVENT', `event.queues: ${(err as Error).message}`)
  }
}

export interface SweepHandler {
  (event: unknown, context?: Partial<Context>): Promise<ReaperSummary>
  /** Closes the container's Redis connection (for tests and local runs). */
  close(): Promise<void>
}

export function createHandler(env: Record<string, string | undefined> = process.env, { log = jsonLog }: { log?: Log } = {}): SweepHandler {
  let reaper: Reaper | undefined
  const handler = async (event: unknown, context?: Partial<Context>): Promise<ReaperSummary> => {
    const queues = queuesFromEvent(event)
    reaper ??= createReaper(await loadReaperConfig({}, env, (name) => readSecret(name, { warn: (m) => log('warn', m) })), { log })
    const remainingMs = typeof context?.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis.bind(context) : undefined
    try {
      return await reaper.run({ ...(queues ? { queues } : {}), ...(remainingMs ? { remainingMs } : {}) })
    } catch (err) {
      if (err instanceof EchoMQError && err.code === 'ERR_CONNECTION') {
        await reaper.close().catch(() => undefined)
        reaper = undefined
      }
      throw err
    } finally {
      // `serverless invoke local` waits for open sockets; a deployed function keeps its connection warm.
      if (env.IS_LOCAL === 'true') await reaper?.close()
    }
  }
  return Object.assign(handler, { close: async () => reaper?.close() })
}

export const handler = createHandler()
