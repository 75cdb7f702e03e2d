/**
 * `echomq pause <queue>` and `echomq resume <queue>`: every worker of the queue, on every host, stops
 * taking jobs (running ones finish; adds, delayed promotions and the sweep's recoveries go on), or takes
 * them again. Both go through the library's Queue; `stats` shows which queues are paused.
 */
import { command } from '../command.js'
import { out } from '../format.js'
import { prefixOf, queueArg } from '../input.js'
import { redisUrlOf, withClient } from '../redis.js'
import { withQueue } from '../reports/job-lists.js'

const PAUSE_HELP = [
  'Every worker of the queue, on every host, stops taking jobs within a second; running jobs finish.',
  'Adds, delayed promotions and the sweep\u2019s recoveries go on, into wait, until "echomq resume".',
].join('\n')
const RESUME_HELP = 'Workers take the waiting jobs again.'

function pausing(paused: boolean) {
  const verb = paused ? 'pause' : 'resume'
  return command({
    summary: paused
      ? 'stop every worker of a queue taking jobs (running ones finish)'
      : 'let the workers of a paused queue take jobs again',
    usage: `echomq ${verb} <queue>\n\n${paused ? PAUSE_HELP : RESUME_HELP}`,
    options: {},
    positionals: 1,
    async run(values, positionals) {
      const queue = queueArg(positionals, `echomq ${verb} <queue>`)
      const prefix = prefixOf(values)
      const { url } = await redisUrlOf(values)
      await withClient(url, (c) => withQueue(c, prefix, queue, (q) => (paused ? q.pause() : q.resume())))
      if (values.json) out(JSON.stringify({ queue, paused }))
      else out(`queue ${queue} ${paused ? 'paused' : 'resumed'}`)
    },
  })
}

export const pause = pausing(true)
export const resume = pausing(false)
