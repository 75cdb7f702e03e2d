/**
 * The scheduled reaper. Thin: read the configuration (once per container), sweep every queue with the
 * library, publish metrics, return a summary. The Redis and CloudWatch clients are created once per
 * container and reused by warm invocations; a Redis that does not answer fails the invocation within
 * REDIS_TIMEOUT_MS. Secrets never reach the logs: URLs are logged with the password masked.
 */
import type { Context } from 'aws-lambda'
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch'
import { closeConnection, lastConnectionError, openConnection, redactUrl, type Connection } from '../lib/connection.js'
import { EchoMQError, withLastError, withoutSecrets } from '../lib/errors.js'
import { publishMetrics } from '../lib/metrics.js'
import { validateQueueName } from '../lib/options.js'
import { readReaperConfig, type ReaperConfig } from '../lib/reaper-config.js'
import { runReaper, type Log, type ReaperSummary } from '../lib/reaper.js'
import { checkEvictionPolicy, connectReaper } from '../lib/reaper-connection.js'

export type { ReaperSummary }

const jsonLog: Log = (level, message, fields = {}) => {
  const line = JSON.stringify({ level, message, ...fields })
  if (level === 'error') console.error(line)
  else console.log(line)
}

/** A manual invocation may name the queues: `{ "queues": ["emails"] }`. A scheduled event has no such field. */
function queuesFromEvent(event: unknown): string[] | undefined {
  if (event === undefined || event === null) return undefined
  if (typeof event !== 'object' || Array.isArray(event)) {
    throw new EchoMQError('ERR_EVENT', `expected the event to be an object (a scheduled event or { "queues": [...] }), got: ${JSON.stringify(event)}`)
  }
  const queues = (event as { queues?: unknown }).queues
  if (queues === undefined) return undefined
  if (!Array.isArray(queues) || queues.length === 0) throw new EchoMQError('ERR_EVENT', 'expected event.queues to be a non-empty array of queue names')
  try {
    return queues.map((q) => validateQueueName(q))
  } catch (err) {
    throw new EchoMQError('ERR_EVENT', `event.queues: ${(err as Error).message}`)
  }
}

interface Container {
  config: ReaperConfig
  redis?: Connection
  cloudwatch?: CloudWatchClient
  evictionChecked?: boolean
}

export interface SweepHandler {
  (event: unknown, context?: Partial<Context>): Promise<ReaperSummary>
  /** Closes the container's Redis connection (for tests and local runs). */
  close(): Promise<void>
}

/** `log` replaces the JSON log lines (the echomq command prints its own tables). */
export function createHandler(env: Record<string, string | undefined> = process.env, { log = jsonLog }: { log?: Log } = {}): SweepHandler {
  let container: Container | undefined

  const handler = async function handler(event: unknown, context?: Partial<Context>): Promise<ReaperSummary> {
    const eventQueues = queuesFromEvent(event)
    container ??= { config: readReaperConfig(env) }
    const { config } = container
    if (!container.redis || container.redis.client.status === 'end') {
      container.redis = openConnection(config.redisUrl, connectReaper(config))
    }
    const redis = container.redis
    try {
      await ping(redis, config)
      if (!container.evictionChecked) {
        container.evictionChecked = true
        await checkEvictionPolicy(redis.client, log)
      }
      const remainingMs = typeof context?.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis.bind(context) : undefined
      const { summary, runs } = await runReaper(redis.client, config, { log, ...(remainingMs ? { remainingMs } : {}), ...(eventQueues ? { queues: eventQueues } : {}) })
      if (config.metricsMode === 'api') container.cloudwatch ??= new CloudWatchClient({})
      await publishMetrics(runs, { mode: config.metricsMode, namespace: config.namespace, log, ...(container.cloudwatch ? { client: container.cloudwatch } : {}) })
      log('info', 'summary', summary)
      return summary
    } catch (err) {
      // A failed connection is rebuilt by the next invocation rather than reused.
      container.redis = undefined
      redis.client.disconnect()
      throw err
    } finally {
      // `serverless invoke local` waits for open sockets; a deployed function keeps its connection warm.
      if (env.IS_LOCAL === 'true' && container.redis) {
        await closeConnection(container.redis)
        container.redis = undefined
      }
    }
  }
  return Object.assign(handler, {
    async close() {
      if (container?.redis) await closeConnection(container.redis)
      if (container) container.redis = undefined
    },
  })
}

async function ping(redis: Connection, config: ReaperConfig): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${config.redisTimeoutMs} ms`)), config.redisTimeoutMs)
  })
  try {
    await Promise.race([redis.client.ping(), timeout])
  } catch (err) {
    const message = withLastError((err as Error).message, lastConnectionError(redis.client))
    throw new EchoMQError('ERR_CONNECTION', `Redis at ${redactUrl(config.redisUrl)} is unreachable: ${message}`, { cause: withoutSecrets(err) })
  } finally {
    clearTimeout(timer)
  }
}

export const handler = createHandler()
