/**
 * The scheduled reaper's Lambda entry, kept thin: a Powertools Logger with the invocation's context, then
 * the container's reaper (lib/reaper/lambda.ts), which parses the event, reads the configuration (the
 * Redis URL from SSM), sweeps every queue, publishes the metrics and returns the summary. A failed
 * invocation logs one error line and throws, so Lambda counts it.
 */
import type { Context } from 'aws-lambda'
import { lambdaSettings } from '../lib/reaper/config.js'
import { containerReaper } from '../lib/reaper/lambda.js'
import { type Log, lambdaLog } from '../lib/reaper/log.js'
import type { ReaperSummary } from '../lib/reaper/reaper.js'

export type { ReaperSummary }

export interface SweepHandler {
  (event: unknown, context?: Partial<Context>): Promise<ReaperSummary>
  /** Closes the container's Redis connection (for tests and local runs). */
  close(): Promise<void>
}

/** `log`: instead of the Powertools Logger (the CLI and some tests pass their own). */
export function createHandler(env: Record<string, string | undefined> = process.env, { log }: { log?: Log } = {}): SweepHandler {
  const logger = log ? { log, addContext: () => undefined } : lambdaLog(lambdaSettings(env).service)
  const reaper = containerReaper(env, logger.log)
  const handler = async (event: unknown, context?: Partial<Context>): Promise<ReaperSummary> => {
    logger.addContext(context)
    const remainingMs = typeof context?.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis.bind(context) : undefined
    return reaper.invoke(event, remainingMs)
  }
  return Object.assign(handler, { close: () => reaper.close() })
}

export const handler = createHandler()
