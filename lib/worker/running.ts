/**
 * A run: a job taken (or started from the hand) gets a slot, its processor runs, and its outcome goes to
 * worker/finishing.ts. A job whose take came back after close() began, or that finds no slot, goes back
 * to `wait` unstarted.
 */
import { EchoMQError, UnrecoverableError } from '../errors.js'
import { Job } from '../job.js'
import { toJson } from '../json.js'
import { DEFAULTS } from '../options.js'
import { readBackoffType } from '../redis/queries.js'
import type { Run, RunContext, Started } from './context.js'
import { failureOf, strategyRetry } from './failure.js'
import { type Ended, finish, giveBack } from './finishing.js'

/** Most bytes of JSON a processor's result is stored with (as job data: DEFAULTS.maxDataBytes). */
export const RESULT_MAX_BYTES = DEFAULTS.maxDataBytes

/**
 * A job a take or finish took starts in the slot that call was sent for; one whose reply came after
 * close() or pause() began (a slow or stalled link), or that finds no slot, goes back to `wait` unstarted.
 */
export function startOrGiveBack(core: RunContext, started: Started): void {
  if (core.runs.get(started.job.id)?.token === started.token) return // a replayed take handed back a run going here
  // Paused (worker.pause()) too: a call sent before the pause starts nothing after it, as BullMQ's fetches none.
  if (core.phase === 'running' && !core.pausedLocally && core.processing < core.settings.concurrency) start(core, started)
  else void core.calls.track(giveBack(core, started))
}

/** A slot is free, and no call in flight fills it: the jobs in hand start now. */
export function startReady(core: RunContext): void {
  while (core.phase === 'running' && !core.pausedLocally && core.processing + core.incoming < core.settings.concurrency) {
    const next = core.hand.start()
    if (!next) return
    start(core, next, true)
  }
}

/**
 * Starts a run. A job from the hand is not taken yet: the call that takes it (the batcher's, which
 * leaves in this tick) goes out before its processor runs, and its lease is renewed once taken.
 */
function start(core: RunContext, { job, token, plain, parent, sentAt }: Started, fromHand = false): void {
  const current = core.runs.get(job.id)
  if (current?.token === token) return // a replayed take handed back a run already going here
  // A sweep recovered the job from a run still going here and this worker took it again: that run is fenced out.
  if (current) core.lockLost(job.id, 'the job was recovered and taken again')
  const controller = core.wantsSignal ? new AbortController() : undefined
  if (!fromHand) core.locks.add({ id: job.id, token }, sentAt)
  core.processing++
  core.startsLeft--
  core.hadWork = true
  const run: Run = { job: new Job(job, core.scope, token), token, plain, parent, controller, phase: 'running', done: Promise.resolve() }
  core.runs.set(job.id, run)
  // A scheduler's run: its next run is made now, as BullMQ's worker makes it (worker/promoter.ts).
  void core.promoter.started(job.id)
  let running: Promise<void>
  if (fromHand) {
    core.finishes.poke()
    running = new Promise<void>((resolve) => process.nextTick(resolve)).then(() => execute(core, run))
  } else running = execute(core, run)
  run.done = running.finally(() => {
    if (core.runs.get(job.id) !== run) return core.wake?.()
    core.locks.remove(job.id)
    core.runs.delete(job.id)
    core.wake?.()
  })
}

/** Runs the processor, then finishes the run: complete, fail (an attempt used) or release. */
async function execute(core: RunContext, run: Run): Promise<void> {
  core.notify('active', run.job, 'waiting')
  const started = core.settings.clock.now()
  let ended: Ended
  try {
    ended = await processed(core, run)
  } catch (err) {
    // Not the processor's throw (processed() catches that) but ours: the run still ends, its slot freed and
    // its job failed, rather than left in `active` with a slot that never comes back.
    core.report(new EchoMQError('ERR_JOB_STATE', `worker ${core.name} could not judge the run of job ${run.job.id}`, { cause: err }))
    ended = { action: 'fail', value: 'the worker could not judge this run', error: err, failed: true, stack: '' }
  } finally {
    core.processing--
    startReady(core)
    core.takeAhead.ran(core.settings.clock.now() - started)
  }
  await finish(core, run, ended)
}

async function processed(core: RunContext, run: Run): Promise<Ended> {
  // A parent a child failed (failParentOnFailure) fails unrun, as BullMQ's worker fails it.
  const deferred = run.job.deferredFailure
  if (deferred !== undefined) {
    const error = new UnrecoverableError(deferred)
    return { action: 'fail-final', value: deferred, error, failed: true, stack: error.stack ?? '' }
  }
  try {
    const result = await core.processor(run.job, run.token, run.controller?.signal as AbortSignal)
    return { action: 'complete', value: resultJson(core, run.job.id, result), result, failed: false, stack: '' }
  } catch (err) {
    const { action, reason, stack, moved: name } = failureOf(err)
    // A DelayedError after a moveToDelayed ended the run there (its phase is `moved`, see below); a
    // WaitingChildrenError after a moveToWaitingChildren the same.
    if (name !== undefined && run.phase !== 'moved') {
      const move = name === 'DelayedError' ? 'job.moveToDelayed' : 'a successful job.moveToWaitingChildren'
      core.report(
        new EchoMQError(
          'ERR_JOB_STATE',
          `job ${run.job.id} of queue ${core.name}: ${name} thrown without ${move}; the job went back to wait`,
        ),
      )
    }
    const ended: Ended = { action, value: reason, error: err, failed: true, stack }
    if (action === 'fail') {
      const retry = await retryOf(core, run, err)
      if (retry === 'final') ended.action = 'fail-final'
      else ended.delayMs = retry
    }
    return ended
  }
}

/** A failure's retry under settings.backoffStrategy (worker/failure.ts): read the job's backoff type only then. */
async function retryOf(core: RunContext, run: Run, err: unknown): Promise<number | 'final' | undefined> {
  try {
    return await strategyRetry(core.settings.backoffStrategy, run.job, err, () => readBackoffType(core.conn.client, core.keys, run.job.id))
  } catch (e) {
    core.report(
      new EchoMQError('ERR_OPTIONS', `settings.backoffStrategy failed for job ${run.job.id}: ${String((e as Error)?.message ?? e)}`),
    )
    return undefined
  }
}

/**
 * The result as stored (`returnValue`). One JSON cannot hold (a BigInt, a cycle, a Map, more than
 * RESULT_MAX_BYTES) is reported and stored as null: the job still completes, as running a processor
 * that succeeded again would repeat its work.
 */
function resultJson(core: RunContext, id: string, result: unknown): string {
  if (result === undefined) return 'null'
  try {
    return toJson(result, 'its result', RESULT_MAX_BYTES)
  } catch (err) {
    core.report(new EchoMQError('ERR_JOB_DATA', `job ${id} of queue ${core.name} completed, but ${(err as Error).message}: stored as null`))
    return 'null'
  }
}
