/**
 * How a worker takes jobs: its loop takes up to its free slots in one call (reserved or peeked ids, else
 * ids read from `wait`), and, when nothing was ready, blocks on the queue's marker key (BZPOPMIN,
 * BLOCK_TIMEOUT_S) rather than poll. A due time in the marker hands it delayed jobs to promote
 * (worker/promoter.ts); a limiter's hold makes it sleep, asking Redis again after maximumRateLimitDelay at most.
 */
import { type TakeResult, take as takeCall } from '../redis/commands.js'
import { rearmMarker, waitForWork } from '../redis/queries.js'
import { registration } from '../registry.js'
import { IDLE, type RunContext, type WorkerPhase } from './context.js'
import { startOrGiveBack, startReady } from './running.js'

/**
 * How long an idle worker blocks on the marker (s). Every add wakes it; when the block times out nothing
 * was added, so it only renews its registration (REGISTRATION_REFRESH_MS, the same minute) and blocks
 * again: an idle worker sends two commands a minute.
 */
const BLOCK_TIMEOUT_S = 60
/** A blocking call with no answer this long past its timeout is on a dead link: reconnect. */
const BLOCK_GUARD_MS = 10_000
const MAX_TAKE_BATCH = 100
const RETRY_BACKOFF_MS = [100, 250, 500, 1000, 2000]
/**
 * How long a worker with a free slot waits while the queue runs as many jobs as its global concurrency
 * allows, before it asks again: a run of its own ending cuts the wait short (its slot is free), another
 * worker's does not. Only a queue with a global concurrency ever waits so.
 */
const MAXED_NAP_MS = 1000

/** The take loop, until close(): settles once it has stopped. */
export async function takeLoop(core: RunContext): Promise<void> {
  const { clock, prefix } = core.settings
  const register = registration(core.conn.client, prefix, core.name, () => clock.now())
  const ensureRegistered = () =>
    void register().then((err) => err && core.report(core.failure(`register (in ${prefix}:queues, for the reaper) queue`, err)))
  let failures = 0
  // After a block that timed out nothing was added: block again without reading `wait`.
  let idle = false
  while (core.phase === 'running') {
    ensureRegistered()
    try {
      const round = await takeRound(core, idle)
      if (round === 'stop') break
      if (round !== 'again') {
        idle = round === 'idle'
        failures = 0
      }
    } catch (err) {
      if (core.phase !== 'running') break
      idle = false
      core.report(core.failure('take jobs from queue', err))
      await core.nap(RETRY_BACKOFF_MS[Math.min(failures++, RETRY_BACKOFF_MS.length - 1)])
    }
  }
}

/**
 * One round of the loop: 'again' when it waited (paused, no free slot, held back) and the next round
 * decides; 'idle' when a block on the marker timed out (nothing was added); 'stop' when closing.
 */
async function takeRound(core: RunContext, idle: boolean): Promise<'again' | 'idle' | 'busy' | 'stop'> {
  const { clock, concurrency } = core.settings
  // Paused (worker.pause()): no job is taken until resume() or close().
  if (core.pausedLocally) {
    await core.nap()
    return 'again'
  }
  // A slot a run's finish is taking for is not free (runs holds the finishing ones), nor one a call in flight fills.
  startReady(core)
  const free = concurrency - core.runs.size - core.incoming
  // Every start the worker has left (MAX_STARTS) is promised to a job set aside or being taken: wait for those.
  if (free <= 0 || (core.takeAhead.room() <= 0 && core.takeAhead.reservedCount === 0)) {
    await core.nap()
    return 'again'
  }
  // Limited: sleep until the window has room (a run ending wakes it too), without asking Redis; at most
  // maximumRateLimitDelay (BullMQ's), then ask again (a hold lifted meanwhile: queue.removeRateLimitKey).
  const held = core.heldUntil - clock.now()
  if (held > 0) {
    const most = core.settings.maximumRateLimitDelay
    // Whether the nap ran its course, not the clock: a timer may fire a fraction of a ms early by performance.now().
    const timedOut = await core.nap(Math.min(held, most))
    if (timedOut && held >= most) core.heldUntil = Math.min(core.heldUntil, clock.now())
    return 'again'
  }
  if (core.maxed) {
    core.maxed = false
    await core.nap(MAXED_NAP_MS)
    return 'again'
  }
  const took = !idle && (await take(core, Math.min(free, MAX_TAKE_BATCH)))
  // Held back by the limiter or the global concurrency: the next round sleeps for it, rather than wait on the marker.
  if (!took && (core.heldUntil > clock.now() || core.maxed)) return 'again'
  if (took) return 'busy'
  // Nothing was ready (nor paused work): as BullMQ's worker, the queue ran dry for this worker since it last had work.
  if (core.hadWork) {
    core.hadWork = false
    core.notify('drained')
  }
  core.emitter.emit(IDLE)
  if ((core.phase as WorkerPhase) !== 'running') return 'stop'
  const woken = await block(core)
  // Woken for work while paused: the wake-up goes back for the other workers.
  if (woken === 'woken' && core.pausedLocally) await rearmMarker(core.conn.client, core.keys)
  // The marker named a due time: promote what is due, and keep a timer for the rest.
  if (woken === 'due') await core.promoter.promoteDue()
  return woken === 'timeout' ? 'idle' : 'busy'
}

/** Waits on the marker until a job is added, close() is called, or `timeoutS` (BLOCK_TIMEOUT_S) passes. */
export async function block(core: RunContext, timeoutS = BLOCK_TIMEOUT_S): Promise<'woken' | 'due' | 'timeout' | 'stopped'> {
  const { clock } = core.settings
  let guard: unknown
  const dead = new Promise<'dead'>((resolve) => {
    guard = clock.setTimeout(() => resolve('dead'), timeoutS * 1000 + BLOCK_GUARD_MS)
  })
  try {
    const popped = waitForWork(core.blocking, core.keys, timeoutS)
    const outcome = await Promise.race([popped, core.stopSignal.then(() => 'stopped' as const), dead])
    if (outcome === 'stopped') return 'stopped'
    if (outcome === 'dead') {
      // A lost wake-up is repaired by the next sweep, which re-arms the marker while `wait` has jobs.
      core.blocking.disconnect(true)
      return 'woken'
    }
    if (outcome === null) return 'timeout'
    return outcome === 'd' ? 'due' : 'woken'
  } finally {
    clock.clearTimeout(guard)
  }
}

/**
 * Takes up to n jobs (reserved or peeked ids, else ids read from `wait`) and starts them; false when
 * nothing was ready (the read found nothing, or the take found nothing and nothing to reserve). The
 * candidates stay claimed until the jobs taken are running.
 */
async function take(core: RunContext, n: number): Promise<boolean> {
  const look = await core.takeAhead.forTake(n)
  if (look.ids.length === 0) return false
  if (core.phase !== 'running') {
    core.takeAhead.settle(look, undefined)
    return false
  }
  const sentAt = core.settings.clock.now()
  // Candidates read from the line may go to another worker first: the same call reserves others in their place.
  const onMiss = { max: look.reserved ? 0 : look.ids.length, reserveMs: core.settings.lockDuration }
  let result: TakeResult
  core.incoming += look.ids.length
  try {
    result = await takeCall(core.conn.client, core.keys, core.takeAhead.takeNext(look), look.ids, look.reserved, onMiss)
  } catch (err) {
    core.takeAhead.settle(look, undefined)
    throw err
  } finally {
    core.incoming -= look.ids.length
  }
  for (const t of result.taken) startOrGiveBack(core, { ...t, sentAt })
  core.takeAhead.settle(look, { left: result.left, taken: result.taken.length, reservedNext: result.reserved })
  core.promoter.learn(result)
  core.hold(result.waitMs)
  if (result.taken.length > 0 || result.reserved.length > 0) return true
  // Candidates gone and none reserved in their place (a limiter reserves none): read the line again,
  // which says whether anything is still ready. Paused, or all left (the limiter): wait as told.
  const gone = look.ids.length - result.left.length
  return gone > 0 && result.waitMs === 0 && core.phase === 'running'
}
