/**
 * `echomq remove <queue> <id>`: deletes a job that is not in flight (its id may then be used again). A job
 * in flight is refused, not torn from its worker: the worker owns it until it finishes or its lease lapses.
 */
import { validateJobId } from '../../lib/options.js'
import { command } from '../command.js'
import { CliError } from '../errors.js'
import { out } from '../format.js'
import { prefixOf, queueArg } from '../input.js'
import { redisUrlOf, withClient } from '../redis.js'
import { withQueue } from '../reports/job-lists.js'

export const remove = command({
  summary: 'remove a job that is not in flight',
  usage: `echomq remove <queue> <id>

Removes the job and its entry in wait, delayed, completed or failed; its id may be used again. Exits 0
when it removed the job, 1 when there is no such job, and 1 (changing nothing) when the job is in
flight: its worker owns it until it finishes or its lease lapses.`,
  options: {},
  positionals: 2,
  async run(values, positionals) {
    const queue = queueArg(positionals, 'echomq remove <queue> <id>')
    const [, raw] = positionals
    if (raw === undefined) throw new CliError('remove needs a job id: echomq remove <queue> <id>', true)
    const id = validateJobId(raw)
    const prefix = prefixOf(values)
    const { url } = await redisUrlOf(values)
    const removed = await withClient(url, (c) => withQueue(c, prefix, queue, (q) => q.removeJob(id)))
    if (values.json) out(JSON.stringify({ queue, id, removed }))
    else if (removed) out(`removed job ${id} from queue ${queue}`)
    else throw new CliError(`no job ${id} in queue ${queue}`)
    if (!removed) process.exitCode = 1
  },
})
