/**
 * `echomq jobs <queue>`: the jobs of one state a page at a time, for finding what failed and why before
 * retrying or removing it. Listing and rendering are ../jobs.ts's; this module checks the state and the page.
 */
import { JOB_STATES } from '../../lib/job.js'
import { command } from '../command.js'
import { out } from '../format.js'
import { oneOf, positiveInt, prefixOf, queueArg, rank } from '../input.js'
import { redisUrlOf, withClient } from '../redis.js'
import { listJobs, renderJobList, withQueue } from '../reports/job-lists.js'

export const jobs = command({
  summary: 'the jobs of a queue in one state (failed by default), a page at a time',
  usage: `echomq jobs <queue> [--state failed] [--limit 50] [--start 0]

Lists jobs in one state with their attempts (made/allowed) and the worker that took them last, and per
state: failed (finish time, reason), delayed (due in, last error), active (start time, last error),
wait (last error, kept from a retried failure), completed (finish time). Orders (the dashboard's words):
wait and prioritized next to run first, delayed earliest due first, active earliest lease deadline first,
completed and failed most recently finished first. Exits 1 for a queue that is not registered and holds no jobs.

  --state <state>     ${JOB_STATES.join(', ')} (default failed)
  --limit <n>         jobs to list (default 50, at most 10000)
  --start <n>         rank to start from, 0 first (default 0): the next page is --start <start + limit>`,
  options: { state: { type: 'string' }, limit: { type: 'string' }, start: { type: 'string' } },
  positionals: 1,
  async run(values, positionals) {
    const queue = queueArg(positionals, 'echomq jobs <queue>')
    const state = oneOf('state', values.state ?? 'failed', JOB_STATES)
    const limit = positiveInt(values, 'limit', 50, 10_000)
    const start = rank(values, 'start', 0)
    const prefix = prefixOf(values)
    const { url } = await redisUrlOf(values)
    const list = await withClient(url, (c) => withQueue(c, prefix, queue, (q) => listJobs(q, state, start, limit)))
    out(values.json ? JSON.stringify(list) : renderJobList(list))
  },
})
