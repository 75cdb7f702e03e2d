/**
 * `echomq/reaper`: the serverless reaper as a package entry: the Lambda handler (`createHandler`), its
 * configuration (`reaperConfig`, the variables config.ts lists) and the metric names its alarms use.
 *
 * The reaper needs packages a library user does not: Powertools Logger and Parameters, the AWS SDK's SSM
 * and CloudWatch clients. They are optional peer dependencies of `echomq`, installed by whoever deploys
 * the reaper (REAPER_PEER_DEPENDENCIES, peers.ts). This module imports none of them: `createHandler` checks the
 * handler's own settings at once and loads the handler (handler.ts, which imports them) right away, and
 * when one is missing its invocations fail with ERR_CONFIG naming every missing package and the command
 * that installs them, instead of Node's bare ERR_MODULE_NOT_FOUND for the first one it met.
 */
import { lambdaSettings } from './config.js'
import type { HandlerOptions, SweepHandler } from './handler.js'
import type { LambdaContext } from './log.js'
import metricNames from './metric-names.json' with { type: 'json' }
import { withPeers } from './peers.js'
import type { ReaperSummary } from './reaper.js'

export { METRICS_MODES, type MetricsMode, type ReaperConfig, type ReaperOptions, reaperConfig, SECRET_MAX_AGE_S_DEFAULT } from './config.js'
export type { Log, LogLevel } from './log.js'
export { REAPER_PEER_DEPENDENCIES } from './peers.js'
export type { HandlerOptions, LambdaContext, ReaperSummary, SweepHandler }

/** The names of the metrics the reaper publishes, and of its namespace's default (lib/reaper/metric-names.json). */
export const METRIC_NAMES = metricNames

/**
 * The reaper's Lambda handler, configured from `env` (default process.env): `export const handler =
 * createHandler()`. Each invocation sweeps every queue and resolves to the summary; `close()` ends the
 * container's Redis connection (tests, local runs).
 */
export function createHandler(env: Record<string, string | undefined> = process.env, options: HandlerOptions = {}): SweepHandler {
  lambdaSettings(env)
  const loading = withPeers('echomq/reaper', () => import('./handler.js')).then((m) => m.createHandler(env, options))
  // Reported by the first invocation, not as an unhandled rejection while the container starts.
  loading.catch(() => undefined)
  const handler = async (event: unknown, context?: LambdaContext): Promise<ReaperSummary> => (await loading)(event, context)
  return Object.assign(handler, { close: async () => (await loading.catch(() => undefined))?.close() })
}
