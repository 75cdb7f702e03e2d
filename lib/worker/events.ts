/**
 * What a worker tells its listeners beyond its runs: an outage of its connection once, when it starts
 * (calls wait through reconnects before they fail), `ready` the first time the connection answers, and
 * `failed` for the jobs its stalled sweep failed.
 */
import { UnrecoverableError } from '../errors.js'
import { jobFromHash } from '../job.js'
import { watchOutages } from '../redis/outages.js'
import { readJobs } from '../redis/queries.js'
import type { RunContext } from './context.js'

/** The reason BullMQ gives a job stalled past maxStalledCount (lua/sweep-11.lua stores the same). */
const STALLED_TOO_OFTEN = 'job stalled more than allowable limit'

/**
 * `failed` (job, UnrecoverableError, 'active') for each job this worker's stalled sweep failed, as a BullMQ
 * worker emits for one (BullMQ fails it in the worker that takes it next; EchoMQ's sweep fails it at once).
 */
export async function stalledFailed(core: RunContext, ids: string[], sent = new Map<string, Record<string, string>>()): Promise<void> {
  // As each job was when it failed (the sweep sent it back: its removeOnFail, or the pass's trim, may have
  // removed it since); read from Redis only if not sent.
  const unread = ids.filter((id) => !sent.has(id))
  let hashes: Record<string, string>[]
  try {
    hashes = unread.length > 0 ? await readJobs(core.conn.client, core.keys, unread) : []
  } catch (err) {
    return core.report(core.failure('read the jobs its stalled sweep failed, of queue', err))
  }
  const read = new Map(unread.map((id, i) => [id, hashes[i] ?? {}]))
  for (const id of ids) {
    const hash = sent.get(id) ?? read.get(id) ?? {}
    core.notify('failed', jobFromHash(id, hash, core.scope), new UnrecoverableError(STALLED_TOO_OFTEN), 'active')
  }
}

export function watchConnection(core: RunContext): void {
  const client = core.conn.client
  let ready = false
  const onReady = () => {
    if (ready) return
    ready = true
    core.notify('ready')
  }
  const unwatch = watchOutages(client, (err) => {
    if (core.phase === 'running') core.report(core.failure('connect to Redis (retrying) for queue', err))
  })
  client.on('ready', onReady)
  // A connection given to the worker outlives it (a worker function's, reused by each invocation's worker).
  core.unwatch = () => {
    unwatch()
    client.off('ready', onReady)
  }
}
