/**
 * `echomq retry <queue>`: failed jobs back to `wait` with a fresh attempts budget, once their cause is
 * fixed. It is all or nothing with --id (every job named must be failed, as the library's retryJobs
 * requires), oldest first with --all, and --dry-run shows what a real run would do without changing anything.
 */
import { MAX_JOBS_PER_CALL } from '../../lib/queue.js'
import { command } from '../command.js'
import { CliError } from '../errors.js'
import { out } from '../format.js'
import { jobIds, positiveInt, prefixOf, queueArg } from '../input.js'
import { redisUrlOf, withClient } from '../redis.js'
import { dryRunAll, dryRunIds, type RetryReport, renderRetry, withQueue } from '../reports/job-lists.js'

export const retry = command({
  summary: 'send failed jobs back to wait with a fresh attempts budget',
  usage: `echomq retry <queue> (--id <id> ... | --all [--limit n]) [--dry-run]

Moves failed jobs to the back of wait with attemptsMade 0; each keeps its history (the failure becomes
its lastError). With --id every job named must be failed, else nothing changes and the command exits 1.
With --all the oldest failed jobs go first. Prints the ids moved.

  --id <id>           a failed job to retry (repeatable or comma list, at most ${MAX_JOBS_PER_CALL})
  --all               every failed job (up to --limit)
  --limit <n>         with --all: retry at most n jobs
  --dry-run           change nothing: print what would be retried (with --id: each job's state, and
                      exit 1 when one is not failed, as the real run would)`,
  options: {
    id: { type: 'string', multiple: true },
    all: { type: 'boolean', default: false },
    limit: { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
  },
  positionals: 1,
  async run(values, positionals) {
    const queue = queueArg(positionals, 'echomq retry <queue> (--id <id> ... | --all)')
    const ids = jobIds(values.id)
    const { all, 'dry-run': dryRun } = values
    if (all === (values.id !== undefined)) throw new CliError('give exactly one of --id <id> and --all', true)
    if (!all && ids.length === 0) throw new CliError('--id needs a job id', true)
    if (!all && values.limit !== undefined) throw new CliError('--limit goes with --all (--id retries exactly the jobs named)', true)
    const limit = values.limit === undefined ? undefined : positiveInt(values, 'limit', 1, Number.MAX_SAFE_INTEGER)
    const prefix = prefixOf(values)
    const { url } = await redisUrlOf(values)
    const report = await withClient(url, (c) =>
      withQueue(c, prefix, queue, async (q): Promise<RetryReport> => {
        if (dryRun) return all ? dryRunAll(q, limit) : dryRunIds(q, ids)
        // A fresh attempts budget, as the command says (docs/cli.md).
        const retried = await q.retryJobs({ ...(all ? (limit === undefined ? {} : { limit }) : { ids }), resetAttemptsMade: true })
        return { queue, dryRun, retried }
      }),
    )
    out(values.json ? JSON.stringify(report) : renderRetry(report))
    if (report.jobs?.some((j) => j.state !== 'failed')) process.exitCode = 1
  },
})
