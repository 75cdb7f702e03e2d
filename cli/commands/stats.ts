/**
 * `echomq stats`: a queue's counts at a glance, per registered queue or for those named. Read-only, so it
 * still answers when Redis is out of memory, when it is most needed; a named queue that is neither
 * registered nor holding jobs (a typo, a wrong --prefix) is an error rather than a row of zeros.
 */
import { command } from '../command.js'
import { out, table } from '../format.js'
import { prefixOf, queueNames } from '../input.js'
import { redisUrlOf, withClient } from '../redis.js'
import { stats as countsPerQueue } from '../reports/inspection.js'

export const stats = command({
  summary: 'wait / prioritized / delayed / active / stalled / completed / failed per queue (each job once), and which are paused',
  usage: `echomq stats [--queue q ...]

  --queue <q>         queue to show (repeatable or comma list; default: every registered queue)`,
  options: { queue: { type: 'string', multiple: true } },
  async run(values) {
    const queues = queueNames(values.queue)
    const prefix = prefixOf(values)
    const { url } = await redisUrlOf(values)
    const result = await withClient(url, (c) => countsPerQueue(c, prefix, queues))
    if (values.json) return out(JSON.stringify(result))
    const rows = Object.entries(result).map(([q, c]) => [
      c.paused ? `${q} (paused)` : q,
      c.wait,
      c.prioritized,
      c.delayed,
      c.active,
      c.stalled,
      c.completed,
      c.failed,
    ])
    const headers = ['queue', 'wait', 'prioritized', 'delayed', 'active', 'stalled', 'completed', 'failed']
    out(rows.length === 0 ? 'no queues registered' : table(headers, rows))
  },
})
