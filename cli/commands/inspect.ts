/**
 * `echomq inspect <queue>`: what an operator asks when jobs seem stuck: which worker holds each job in
 * flight and how long its lease has left, whether the sweep has marked it, what is delayed and when it is
 * due, and why jobs failed. The reads are ../inspect.ts's; this module checks the arguments and prints.
 */
import { command } from '../command.js'
import { out } from '../format.js'
import { positiveInt, prefixOf, queueArg } from '../input.js'
import { redisUrlOf, withClient } from '../redis.js'
import { inspect as inspectQueue, renderInspection } from '../reports/inspection.js'
import { withQueue } from '../reports/job-lists.js'

export const inspect = command({
  summary: 'in-flight jobs with their leases and workers, delayed jobs, failed jobs with their reasons',
  usage: `echomq inspect <queue> [--limit 50]

Counts, then three sections: jobs in flight (worker, lease time left, whether the sweep marked it,
attempts), delayed jobs (due in, by Redis's clock; the last error of a retry in backoff), failed jobs
(worker, attempts, reason). Exits 1 for a queue that is not registered and holds no jobs.

  --limit <n>         rows per section (default 50)`,
  options: { limit: { type: 'string' } },
  positionals: 1,
  async run(values, positionals) {
    const queue = queueArg(positionals, 'echomq inspect <queue>')
    const limit = positiveInt(values, 'limit', 50, 10_000)
    const prefix = prefixOf(values)
    const { url } = await redisUrlOf(values)
    const result = await withClient(url, (c) => withQueue(c, prefix, queue, (q) => inspectQueue(q, limit)))
    out(values.json ? JSON.stringify(result) : renderInspection(queue, result))
  },
})
