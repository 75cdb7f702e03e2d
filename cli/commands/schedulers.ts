/**
 * `echomq schedulers <queue>`: the queue's job schedulers with when each next runs, its timing and how
 * many jobs it has made, soonest first; the schedule a team forgot it had is one command away. Times are
 * read against Redis's clock, the one schedules keep; a next run in the past (a schedule no sweep has
 * caught up yet) says how long ago it fell due.
 */

import { serverTimeMs } from '../../lib/redis/queries.js'
import { command } from '../command.js'
import { out, table } from '../format.js'
import { positiveInt, prefixOf, queueArg } from '../input.js'
import { redisUrlOf, withClient } from '../redis.js'
import { withQueue } from '../reports/job-lists.js'

export const schedulers = command({
  summary: 'the job schedulers of a queue with their next run',
  usage: `echomq schedulers <queue> [--limit 100]

Lists the queue's job schedulers, the next run first: id, job name, timing (every, or a cron pattern
with its time zone), the next run (ISO time and how soon), jobs made so far and their limit.

  --limit <n>         schedulers to list (default 100, at most 10000)`,
  options: { limit: { type: 'string' } },
  positionals: 1,
  async run(values, positionals) {
    const queue = queueArg(positionals, 'echomq schedulers <queue>')
    const limit = positiveInt(values, 'limit', 100, 10_000)
    const prefix = prefixOf(values)
    const { url } = await redisUrlOf(values)
    const [list, now] = await withClient(url, (c) =>
      Promise.all([withQueue(c, prefix, queue, (q) => q.getJobSchedulers(0, limit - 1, true)), serverTimeMs(c)]),
    )
    if (values.json) return out(JSON.stringify(list))
    if (list.length === 0) return out(`no job schedulers in queue ${queue}`)
    const rows = list.map((s) => [
      s.key,
      s.name,
      s.every !== undefined ? `every ${s.every} ms` : `${s.pattern} (${s.tz ?? 'UTC'})`,
      `${new Date(s.next).toISOString()} (${fromNow(s.next - now)})`,
      s.limit === undefined ? String(s.iterationCount) : `${s.iterationCount}/${s.limit}`,
    ])
    out(table(['scheduler', 'job name', 'timing', 'next run', 'jobs made'], rows))
  },
})

/** How far off a run is: `in 5 s`, `due now`, or `54 s ago` for one overdue. */
function fromNow(ms: number): string {
  const s = Math.round(ms / 1000)
  return s > 0 ? `in ${s} s` : s < 0 ? `${-s} s ago` : 'due now'
}
