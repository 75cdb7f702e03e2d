/**
 * The scope of the jobs a worker runs (what a processor's `job` acts through): progress and log lines
 * fenced by the run's token, so a run that lost its job changes nothing and learns it; job.moveToDelayed
 * ends the run there; the job's own remove(), retry()... go through a Queue made when first used.
 */
import { EchoMQError } from '../errors.js'
import { jobFlows } from '../flows/job-flows.js'
import type { Job, JobScope } from '../job.js'
import { jobChanges } from '../job-changes.js'
import { jobFinishes } from '../job-finishes.js'
import { progressJson } from '../queue/job-scope.js'
import { Queue } from '../queue.js'
import { waitUntilFinished } from '../queue-events.js'
import { addLog, updateProgress } from '../redis/commands.js'
import { encodeKeep } from '../redis/job-codec.js'
import { qualifiedNameOf } from '../redis/keys.js'
import { readOutcome } from '../redis/queries.js'
import type { RunContext } from './context.js'
import { takeNext } from './manual.js'
import { RESULT_MAX_BYTES } from './running.js'

type Status = 'ok' | 'missing' | 'lost'

export function workerJobScope(core: RunContext): JobScope {
  const client = core.conn.client
  const { keys, name } = core
  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn()
    } catch (err) {
      throw core.failure(what, err)
    }
  }
  // The run is over once its job is in `delayed` or `waiting-children`: no finish, no heartbeat (see
  // DelayedError, WaitingChildrenError).
  const moved = (id: string, token: string) => {
    const run = core.runs.get(id)
    if (run?.token !== token || run.phase !== 'running') return
    run.phase = 'moved'
    core.locks.remove(id)
  }
  const changes = jobChanges({ client, keys, queue: name, maxDataBytes: RESULT_MAX_BYTES, call, moved })
  const flows = jobFlows({ client, keys, queue: name, call, moved })
  // A job taken by hand (worker.getNextJob): fetchNext takes the next under the same token, as getNextJob does.
  const finishes = jobFinishes({
    client,
    keys,
    queue: name,
    call,
    next: (token) => takeNext(core, token),
    keep: (completed) => {
      const keep = completed ? core.settings.removeOnComplete : core.settings.removeOnFail
      return keep === undefined ? undefined : encodeKeep(keep)
    },
    backoffStrategy: core.settings.backoffStrategy,
  })
  const refused = (job: Job, status: 'missing' | 'lost', what: string) =>
    status === 'lost'
      ? new EchoMQError('ERR_LOCK_LOST', `job ${job.id} of queue ${name} lost its lease: ${what}`)
      : new EchoMQError('ERR_JOB_MISSING', `job ${job.id} of queue ${name} no longer exists: ${what}`)
  return {
    updateProgress: async (job, progress, token) => {
      const json = progressJson(progress)
      let status: Status
      try {
        status = await updateProgress(client, keys, job.id, token ?? '', json)
      } catch (err) {
        throw core.failure(`update the progress of job ${job.id} of queue`, err)
      }
      if (status !== 'ok') throw refused(job, status, 'its progress was not recorded')
      core.notify('progress', job, progress)
    },
    log: async (job, row, token) => {
      if (typeof row !== 'string') throw new EchoMQError('ERR_OPTIONS', `expected a log line to be a string, got: ${typeof row}`)
      let reply: { status: Status; count: number }
      try {
        reply = await addLog(client, keys, job.id, token ?? '', row)
      } catch (err) {
        throw core.failure(`log a line of job ${job.id} of queue`, err)
      }
      if (reply.status !== 'ok') throw refused(job, reply.status, 'the line was not logged')
      return reply.count
    },
    waitUntilFinished: (job, events, ttl) =>
      waitUntilFinished(events, { id: job.id, name: job.name, queue: name }, ttl, () => readOutcome(client, keys, job.id)),
    queue: () => {
      core.jobQueue ??= new Queue(name, { connection: client, prefix: core.settings.prefix })
      return core.jobQueue
    },
    changes: () => changes,
    flows: () => flows,
    finishes: () => finishes,
    qualifiedName: qualifiedNameOf(keys),
  }
}
