/**
 * How a run ends: its outcome (complete, fail, release) goes out in the tick's finish call (worker/batcher.ts,
 * worker/finish-batch.ts), fenced by the run's token; the reply says whether the run still owned its job.
 * Jobs the worker will not start (reserved, in hand, or taken after close() began) go back to `wait`.
 */
import type { JobState } from '../job.js'
import {
  type FinishAction,
  type FinishRun,
  finish as finishCall,
  MAX_FINISH_SENDS,
  sendAsAsked,
  type Taken,
  unreserve,
} from '../redis/commands.js'
import { encodeKeep } from '../redis/job-codec.js'
import type { Run, RunContext, RunPhase } from './context.js'
import { failedAttempt, stacksAfter } from './failure.js'

/** How a processor's call ended, as its finish records it. */
export interface Ended {
  action: FinishAction
  /** The result's JSON, or the failure's reason. */
  value: string
  result?: unknown
  error?: unknown
  failed: boolean
  stack: string
  delayMs?: number | undefined
}

/** Records the run's outcome, unless close() gave up on it or job.moveToDelayed ended it. */
export async function finish(core: RunContext, run: Run, ended: Ended): Promise<void> {
  const { value, result, error, failed, stack, delayMs } = ended
  let { action } = ended
  // Given up on by close(), or ended by job.moveToDelayed (its job is in `delayed`: no finish).
  if (run.phase === 'abandoned' || run.phase === 'moved') return
  // A run aborted for a lost lease, or by close(), failed because of the abort: if the job is still its
  // own, return it to wait without charging an attempt (its processor has stopped).
  if ((run.phase === 'lost' || run.aborted) && action.startsWith('fail')) action = 'release'
  if (run.phase === 'running') run.phase = 'finishing'
  try {
    const keep = workerKeep(core, action)
    // A failure's stacktrace as it is to be stored, made here from the list the take sent (undefined: unchanged).
    const stacks = action.startsWith('fail') ? stacksAfter(run.job, stack) : undefined
    const request: FinishRun = {
      run: { id: run.job.id, token: run.token },
      plain: run.plain,
      parent: run.parent,
      action,
      value,
      ...(action.startsWith('fail') ? { stacks: stacks ? JSON.stringify(stacks) : '' } : {}),
      ...(delayMs === undefined || action !== 'fail' ? {} : { delayMs }),
      ...(keep === undefined ? {} : { keep }),
      ...(action === 'complete' ? { kept: !removesAtOnce(keep) && !removesAtOnce(encodeKeep(run.job.opts.removeOnComplete)) } : {}),
    }
    // Sent again while a reply asks for more keys: a child adopted into the job while it ran, or its
    // deduplication id's next job (keepLastIfActive).
    const { reply, sent } = await sendAsAsked(
      request,
      (r) => core.finishes.add(r),
      (r) => r,
    )
    if (sent.parent) run.parent = true
    if (reply.status === 'parent' || reply.status === 'next')
      throw new Error(`the finish of job ${run.job.id} asked for more keys ${MAX_FINISH_SENDS} times (${reply.status})`)
    if (reply.status === 'lost') {
      core.lockLost(run.job.id, `the job is now ${reply.state}; this run's result was discarded`, run)
      return
    }
    if (reply.trim) core.trimmer.request(reply.trim, reply.oldest)
    run.job.state = reply.state as JobState
    if (action === 'release') return
    if (reply.delivered) {
      // A flow's child: its event waits until its parent knows (worker/finish-batch.ts). Its job has ended:
      // the run leaves now, so its slot is free to take for meanwhile (close() waits for the delivery).
      if (core.runs.get(run.job.id) === run) {
        core.locks.remove(run.job.id)
        core.runs.delete(run.job.id)
        core.wake?.()
      }
      await reply.delivered
    }
    run.job.attemptsMade += 1
    if (reply.state === 'completed' || reply.state === 'failed') run.job.finishedOn = reply.finishedOn
    if (action === 'complete') {
      run.job.returnValue = result
      // BullMQ's arguments, `prev` last.
      core.notify('completed', run.job, result, 'active')
    } else {
      failedAttempt(run.job, value, stacks, reply.state)
      // BullMQ's job.delay is the retry's backoff (as the stored job's, lastDelay).
      if (reply.backoffMs !== undefined) run.job.delay = reply.backoffMs
      // BullMQ's `failed` event: the value as the processor threw it.
      core.notify('failed', run.job, failed ? error : undefined, 'active')
    }
  } catch (err) {
    // close() may have given up on the run meanwhile (past its timeout): its error is expected then.
    if ((run.phase as RunPhase) !== 'abandoned') core.report(core.failure(`finish job ${run.job.id} of queue`, err))
  }
}

/** Whether an encoded retention removes a job at once: its count is 0 ("0", or "0," from the number 0), as retention.lua parseKeep reads it. */
function removesAtOnce(keep: string | undefined): boolean {
  if (!keep) return false
  const count = keep.split(',', 1)[0]
  return count !== '' && Number(count) === 0
}

/** The worker's removeOnComplete/removeOnFail, for a job with no retention of its own (lua/finish-16.lua). */
function workerKeep(core: RunContext, action: FinishAction): string | undefined {
  const keep = action === 'complete' ? core.settings.removeOnComplete : core.settings.removeOnFail
  return keep === undefined || action === 'release' ? undefined : encodeKeep(keep)
}

/** Reserved ids (jobs in hand) the worker will not start: back to where they were, no attempt used. */
export async function unreserveHeld(core: RunContext, ids: string[]): Promise<void> {
  try {
    core.handedBack(await core.calls.track(unreserve(core.conn.client, core.keys, ids)))
  } catch (err) {
    core.report(core.failure('return reserved jobs to wait in queue', err))
  }
}

/** A job taken after close() began (by a late take, or a finish while releasing): back to wait, no attempt used. */
export async function giveBack(core: RunContext, { job, token }: Taken): Promise<void> {
  try {
    await finishCall(core.conn.client, core.keys, { id: job.id, token }, 'release', '')
    core.handedBack(1)
  } catch (err) {
    core.report(core.failure(`return job ${job.id} to wait in queue`, err))
  }
}
