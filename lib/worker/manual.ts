/**
 * Taking jobs by hand (BullMQ's manual processing): a Worker made with no processor runs no loop, no
 * heartbeat and no stalled sweep; `worker.getNextJob(token)` takes the next ready job, leased for
 * lockDuration, and the caller finishes it with job.moveToCompleted / job.moveToFailed (lib/job-finishes.ts),
 * extending the lease with job.extendLock(token, ms) when it needs longer: nothing renews it, as in BullMQ.
 * A job whose lease lapses is recovered by a sweep, as any dead worker's.
 *
 * The run's token is `<token>:<start number>` (every lease EchoMQ writes names its start, so a late finish of
 * an earlier start is refused); the Job's `token` is the one given, and its methods take either.
 */
import { EchoMQError } from '../errors.js'
import { Job } from '../job.js'
import { flag } from '../options.js'
import { type Taker, take as takeCall } from '../redis/commands.js'
import { readCandidates } from '../redis/job-reads.js'
import { checkKnown, describe, fail, opt } from '../validate.js'
import type { RunContext } from './context.js'
import { block as waitOnMarker } from './taking.js'

/** A token as a lease holds it: no whitespace (finish receipts are split on spaces), at most this long. */
const TOKEN = /^\S{1,200}$/
/** Takes per getNextJob whose candidate another worker got first, before it says there is none. */
const MAX_TRIES = 5
/** The longest getNextJob waits for a scheduler's next run to be made. */
const NEXT_RUN_WAIT_MS = 2_000

/** Waits for `made`, at most NEXT_RUN_WAIT_MS. */
async function madeWithin(core: RunContext, made: Promise<void>): Promise<void> {
  let timer: unknown
  const late = new Promise<void>((resolve) => {
    timer = core.settings.clock.setTimeout(resolve, NEXT_RUN_WAIT_MS)
  })
  await Promise.race([made, late]).finally(() => core.settings.clock.clearTimeout(timer))
}

/** Who takes a job by hand under `token`: the worker's lease, name and limiter. */
function manualTaker(core: RunContext, token: string): Taker {
  const { lockDuration, name, limiter } = core.settings
  return { workerToken: token, leaseMs: lockDuration, workerName: name, ...(limiter ? { limit: limiter } : {}) }
}

/**
 * BullMQ's worker.getNextJob(token, { block }): the next ready job, taken under `token`, or undefined when
 * none is ready (with `block`, after waiting drainDelay seconds for one; not while the worker's take loop
 * runs: `looping`), the worker is paused, or the queue is paused or rate limited.
 */
export async function getNextJob(core: RunContext, token: unknown, options: unknown, looping = false): Promise<Job | undefined> {
  if (typeof token !== 'string' || !TOKEN.test(token))
    fail('ERR_OPTIONS', `expected getNextJob's token to be 1-200 characters with no whitespace, got: ${describe(token)}`)
  const blocking = opt(checkKnown('getNextJob', options, ['block']).block, true, flag('block'))
  if (core.phase !== 'running') throw new EchoMQError('ERR_CLOSED', `worker for queue ${core.name} is closed: getNextJob takes nothing`)
  const { clock, drainDelay } = core.settings
  const deadline = clock.now() + drainDelay * 1000
  for (let tries = 0; tries < MAX_TRIES && core.phase === 'running' && !core.pausedLocally; ) {
    const taken = await takeOne(core, token)
    if (taken instanceof Job) return taken
    if (taken === 'gone') {
      tries++
      continue
    }
    if (taken === 'held' || !blocking || looping) return undefined
    const left = (deadline - clock.now()) / 1000
    if (left <= 0) return undefined
    const woken = await sharedWait(core, left)
    if (woken === 'due') await core.promoter.promoteDue()
    if (woken === 'stopped') return undefined
  }
  return undefined
}

/**
 * The blocking connection holds one BZPOPMIN at a time: callers of getNextJob waiting together share the
 * one wait (the first caller's, up to its deadline), each then taking for itself. A worker whose take loop
 * runs (it has a processor) owns that connection: its getNextJob does not block.
 */
const waits = new WeakMap<RunContext, ReturnType<typeof waitOnMarker>>()

function sharedWait(core: RunContext, seconds: number): ReturnType<typeof waitOnMarker> {
  let wait = waits.get(core)
  if (!wait) {
    wait = waitOnMarker(core, seconds).finally(() => waits.delete(core))
    waits.set(core, wait)
  }
  return wait
}

/** The next ready job under `token`, without waiting (job.moveToCompleted's fetchNext); none once closing or paused. */
export async function takeNext(core: RunContext, token: string): Promise<Job | undefined> {
  for (let tries = 0; tries < MAX_TRIES && core.phase === 'running' && !core.pausedLocally; tries++) {
    const taken = await takeOne(core, token)
    if (taken instanceof Job) return taken
    if (taken !== 'gone') return undefined
  }
  return undefined
}

/**
 * One take of the next candidate: the Job (emitting `active`, as BullMQ's getNextJob), or why none: nothing
 * ready, its candidate taken first, or held back (paused, -1, or limited: nothing is taken until that ends).
 */
async function takeOne(core: RunContext, token: string): Promise<Job | 'none' | 'gone' | 'held'> {
  const { client } = core.conn
  const ids = await core.calls.track(readCandidates(client, core.keys, 1)).catch((err: unknown) => {
    throw core.failure('read the next job of queue', err)
  })
  if (ids.length === 0) return 'none'
  const result = await core.calls.track(takeCall(client, core.keys, manualTaker(core, token), ids)).catch((err: unknown) => {
    throw core.failure('take a job from queue', err)
  })
  core.promoter.learn(result)
  const taken = result.taken[0]
  if (!taken) return result.waitMs !== 0 ? 'held' : 'gone'
  const job = new Job(taken.job, core.scope, taken.token, token)
  // A scheduler's run taken by hand makes its next run before getNextJob resolves, as BullMQ's (worker/promoter.ts),
  // waiting at most NEXT_RUN_WAIT_MS: an outage leaves it to the promoter's retries.
  await madeWithin(core, core.promoter.started(job.id))
  core.notify('active', job, 'waiting')
  return job
}
