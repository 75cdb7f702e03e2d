/**
 * The scheduled reaper's Lambda handler: a Powertools Logger with the invocation's context, then the
 * container's reaper (lambda.ts), which parses the event, reads the configuration (the Redis URL from
 * SSM), sweeps every queue, publishes the metrics and returns the summary. A failed invocation logs one
 * error line and throws, so Lambda counts it.
 *
 * This module loads the AWS packages (Powertools, the SDK's SSM and CloudWatch clients). The deploy
 * project's function (functions/sweep.ts) imports it directly; the package's `echomq/reaper` entry
 * (index.ts) loads it on demand, so it can name the optional packages when they are missing.
 */
import { lambdaSettings } from './config.js'
import { containerReaper } from './lambda.js'
import { type LambdaContext, type Log, lambdaLog } from './log.js'
import type { ReaperSummary } from './reaper.js'

export interface SweepHandler {
  (event: unknown, context?: LambdaContext): Promise<ReaperSummary>
  /** Closes the container's Redis connection (for tests and local runs). */
  close(): Promise<void>
}

export interface HandlerOptions {
  /** Instead of the Powertools Logger (the CLI and some tests pass their own). */
  log?: Log
}

/** The handler, configured from `env` (the variables config.ts lists). */
export function createHandler(env: Record<string, string | undefined> = process.env, { log }: HandlerOptions = {}): SweepHandler {
  const logger = log ? { log, addContext: () => undefined } : lambdaLog(lambdaSettings(env).service)
  const reaper = containerReaper(env, logger.log)
  const handler = async (event: unknown, context?: LambdaContext): Promise<ReaperSummary> => {
    logger.addContext(context)
    const remainingMs = typeof context?.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis.bind(context) : undefined
    return reaper.invoke(event, remainingMs)
  }
  return Object.assign(handler, { close: () => reaper.close() })
}
