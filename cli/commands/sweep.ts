/**
 * `echomq sweep`: the reaper the Lambda runs, for hosts without Lambda (cron, a Kubernetes CronJob, or a
 * daemon with --every). Its configuration is built the Lambda's way (loadReaperConfig: flags, then the same
 * environment variables, the Redis URL read from SSM when REDIS_URL_PARAMETER names it, every other setting
 * checked before that read), so a setting means the same in both places. Metrics are off unless asked for
 * (--metrics or METRICS_MODE): a laptop should not publish into an account's namespace by accident. With
 * metrics off the count of failed jobs is neither read nor claimed: JobsFailed stays the function's.
 *
 * On an interval a failed run is reported on stderr and the loop keeps its schedule; the exit code (1)
 * says a run failed once the loop stops (SIGINT, SIGTERM, or --times runs).
 */
import { clearLongTimeout, longTimeout } from '../../lib/clock.js'
import { EchoMQError } from '../../lib/errors.js'
import { DEFAULTS } from '../../lib/options.js'
import { loadReaperConfig, METRICS_MODES, type MetricsMode } from '../../lib/reaper/config.js'
import type { Log, ReaperSummary } from '../../lib/reaper/reaper.js'
import { command } from '../command.js'
import { CliError, loadReaperModule, messageOf } from '../errors.js'
import { out, parseDuration, table, withSpinner } from '../format.js'
import { oneOf, positiveInt, prefixOf, queueNames } from '../input.js'
import { readParameter, redisUrlFlag } from '../redis.js'

const log: Log = (level, message, fields) =>
  level !== 'info' && process.stderr.write(`${level}: ${message} ${fields ? JSON.stringify(fields) : ''}\n`)

/** One run's line and table: when, then per queue what the sweep did. */
function render(summary: ReaperSummary): string {
  const rows = Object.entries(summary.queues).map(([q, r]) => [q, r.marked, r.recovered, r.failed, r.error ?? ''])
  const when = `${new Date().toISOString()}  sweep of ${Object.keys(summary.queues).length} queue(s)`
  return `${when}\n${table(['queue', 'marked', 'recovered', 'failed', 'error'], rows)}`
}

export const sweep = command({
  summary: 'run the reaper (what the Lambda runs) once, or on an interval as a daemon',
  usage: `echomq sweep [--queue q ...] [--every 10s] [--times n] [--grace ${DEFAULTS.sweepGraceMs}] [--metrics off]

Runs the reaper the Lambda handler runs, for hosts without Lambda (cron, a Kubernetes CronJob, or a
daemon with --every). Other settings come from the same environment variables as the Lambda (see README).
With --every, a run that fails (Redis unreachable, a queue whose sweep failed) is reported and the loop
keeps its schedule, reconnecting for the next run; it stops on SIGINT or SIGTERM (or after --times runs)
and then exits 1 if any run failed.

  --queue <q>         queue to sweep (repeatable or comma list; default: QUEUES, else every registered queue)
  --every <duration>  sweep on an interval (10s, 500ms, 1m) until stopped
  --times <n>         with --every: stop after n runs
  --grace <ms>        minimum age of a mark before recovery (default: SWEEP_GRACE_MS, else ${DEFAULTS.sweepGraceMs})
  --metrics <mode>    api | emf | off (default: METRICS_MODE, else off); off leaves the count of failed
                      jobs to the reaper that publishes JobsFailed`,
  options: {
    queue: { type: 'string', multiple: true },
    every: { type: 'string' },
    times: { type: 'string' },
    grace: { type: 'string' },
    metrics: { type: 'string' },
  },
  async run(values) {
    const every = values.every === undefined ? undefined : parseDuration(values.every)
    if (values.every !== undefined && every === undefined)
      throw new CliError(`--every expects a duration such as 10s or 500ms, got: ${values.every}`, true)
    if (every === undefined && values.times !== undefined) throw new CliError('--times only goes with --every', true)
    const times = every === undefined ? 1 : positiveInt(values, 'times', Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)
    const { json, grace } = values
    const queues = queueNames(values.queue)
    if (grace !== undefined && !/^\d+$/.test(grace)) throw new CliError(`--grace expects a whole number of ms, got: ${grace}`, true)
    const metricsMode: MetricsMode | undefined =
      values.metrics !== undefined
        ? oneOf('metrics', values.metrics, METRICS_MODES, { ignoreCase: true })
        : process.env.METRICS_MODE
          ? undefined
          : 'off'
    const redisUrl = redisUrlFlag(values)
    const options = {
      prefix: prefixOf(values),
      ...(redisUrl === undefined ? {} : { redisUrl }),
      ...(queues ? { queues } : {}),
      ...(grace === undefined ? {} : { graceMs: Number(grace) }),
      ...(metricsMode === undefined ? {} : { metricsMode }),
    }
    // Loaded here, so the other commands start without the reaper's modules.
    const { createReaper } = await loadReaperModule('echomq sweep', () => import('../../lib/reaper/reaper.js'))
    const config = await loadReaperConfig(options, process.env, readParameter)
    // Only metrics through the API need the AWS SDK: checked before any sweep, so a missing package fails
    // the command at once rather than after the first pass (--metrics off or emf needs none).
    if (config.metricsMode === 'api') {
      await loadReaperModule('echomq sweep --metrics api', () => import('../../lib/reaper/metrics.js').then((m) => m.metricsClient()))
    }
    const reaper = createReaper(config, { log })
    let stop = false
    let wakeUp: () => void = () => undefined
    const interrupt = () => {
      stop = true
      wakeUp()
    }
    process.once('SIGINT', interrupt)
    process.once('SIGTERM', interrupt)
    let failedRuns = 0
    try {
      for (let n = 0; n < times && !stop; n++) {
        if (n > 0 && every !== undefined) {
          await new Promise<void>((resolve) => {
            // Any length: a plain setTimeout over 24.8 days fires at once (sweeps back to back).
            const timer = longTimeout(resolve, every)
            wakeUp = () => {
              clearLongTimeout(timer)
              resolve()
            }
          })
          if (stop) break
        }
        try {
          const summary = await withSpinner('sweeping', !json && Boolean(process.stderr.isTTY), () => reaper.run())
          if (Object.values(summary.queues).some((r) => r.error)) failedRuns++
          out(json ? JSON.stringify(summary) : render(summary))
        } catch (err) {
          // Once: the error is the command's result. On an interval: a daemon reports it and keeps going.
          if (every === undefined) throw err
          failedRuns++
          const code = err instanceof EchoMQError ? `${err.code}: ` : ''
          process.stderr.write(`${new Date().toISOString()}  sweep failed, next try in ${values.every}: ${code}${messageOf(err)}\n`)
        }
      }
    } finally {
      process.off('SIGINT', interrupt)
      process.off('SIGTERM', interrupt)
      await reaper.close()
    }
    if (failedRuns > 0) process.exitCode = 1
  },
})
