/**
 * How a worker closes. As BullMQ's close(force = false), it waits for the running jobs to end, with no
 * bound unless `closeTimeout` was given; close(true) does not wait for them.
 *
 *   1. draining: no new job is taken; running jobs finish as usual (until closeTimeout, when given);
 *   2. abandoning (close(true), or closeTimeout passed): each running processor's signal is aborted and
 *      it has CLOSE_MARGIN_MS to return. One that returns then ends as it says (a failure caused by the
 *      abort goes back to `wait` without using an attempt: the processor has stopped). One still running
 *      is NOT put back to `wait`, as another worker would then run the job while this processor still
 *      does: its lease is no longer renewed, the job stays in `active`, and the stalled sweep recovers it
 *      once the lease has expired (a stall counted, see docs/attempts-and-stalls.md);
 *   3. closed: the helpers with timers stop and the connection closes. When Redis has not answered the
 *      finishes in time, close() says so (one ERR_CONNECTION error), and the connection stays open in the
 *      background for at most one lease, so a late reply (a take whose jobs must go back) is handled.
 *
 * With no job running and no connection up (Redis down, or never reached), nothing can end, so close()
 * does not wait for one. With the connection down and every processor returned, close() waits for their
 * finishes (ioredis reconnecting) only while their leases last: past that, the outcome may no longer be
 * written (a sweep may have recovered the job), so close() stops the reconnects and says so; the stalled
 * sweep recovers those jobs and they run again.
 */
import { settlesWithin } from '../clock.js'
import { EchoMQError } from '../errors.js'
import { CLOSE_MARGIN_MS } from '../options.js'
import { closeConnection, dropConnection } from '../redis/connection.js'
import type { RunContext } from './context.js'

const active = (core: RunContext) => [...core.runs.values()].filter((r) => r.phase === 'running' || r.phase === 'finishing')

/** Stops taking jobs: jobs in hand go back, the loop ends, an idle wait is cut short. */
function stopTaking(core: RunContext): void {
  core.hand.giveBackAll()
  core.phase = 'draining'
  core.stopped()
  core.wake?.()
  // A connected socket ends with the server's close; ioredis's disconnectTimeout timer runs until then.
  if (core.blocking.status === 'ready') core.blockingEnded = new Promise((resolve) => core.blocking.once('end', resolve))
  core.blocking.disconnect()
  void core.takeAhead.close()
}

/** Aborts the signal of every running run (its processor is asked to stop). */
function abortRunning(core: RunContext): void {
  for (const run of core.runs.values()) {
    if (run.phase !== 'running') continue
    run.aborted = true
    run.controller?.abort(new EchoMQError('ERR_CLOSED', `worker for queue ${core.name} is closing: job ${run.job.id} aborted`))
  }
}

/** Gives up on the runs still running: their leases lapse, the sweep recovers their jobs. Returns how many. */
function abandonRunning(core: RunContext): number {
  // Not put back in line while the processor runs (another worker would run it too): the lease lapses.
  let n = 0
  for (const run of core.runs.values()) {
    if (run.phase !== 'running') continue
    run.phase = 'abandoned'
    core.locks.remove(run.job.id)
    n++
  }
  return n
}

/** Stops the helpers with timers; each promise settles when it has. */
const stopHelpers = (core: RunContext): Promise<unknown>[] => [
  core.locks.close(),
  core.stalledChecker.close(),
  core.promoter.close().catch(() => undefined),
  core.jobQueue?.close() ?? Promise.resolve(),
]

function closeLink(core: RunContext): Promise<void> {
  core.unwatch()
  return Promise.all([closeConnection(core.conn), core.blockingEnded]).then(() => undefined)
}

/** How long the link's last chance lasts: the latest lease of the finishes close() waits for (this clock). */
function leasesLast(core: RunContext, runs: ReturnType<typeof active>): number {
  let last = Number.NEGATIVE_INFINITY
  for (const run of runs) last = Math.max(last, core.locks.deadlineOf(run.job.id) ?? Number.NEGATIVE_INFINITY)
  return last
}

/**
 * Waits for the running and finishing runs, for at most `left()`, and, while the link is down with every
 * processor returned, only while their leases last (looked at again every heartbeat: the link may come
 * back, or go). Returns true when it stopped because those leases lapsed.
 */
async function waitForRuns(core: RunContext, left: () => number): Promise<boolean> {
  const { clock, heartbeatInterval } = core.settings
  for (let runs = active(core); runs.length > 0 && left() > 0; runs = active(core)) {
    const down = core.conn.client.status !== 'ready' && runs.every((r) => r.phase === 'finishing')
    const chance = down ? leasesLast(core, runs) - clock.now() : Number.POSITIVE_INFINITY
    if (chance <= 0) return true
    await settlesWithin(clock, Promise.all(runs.map((r) => r.done)), Math.min(left(), chance, heartbeatInterval))
  }
  return false
}

/** What close() says of finished jobs whose outcome Redis has not acknowledged. */
function unrecorded(core: RunContext, finishing: number, lapsed: boolean): EchoMQError {
  const closed = `worker for queue ${core.name} closed before Redis answered: ${finishing} finished job(s)`
  return new EchoMQError(
    'ERR_CONNECTION',
    lapsed
      ? `${closed} not recorded: Redis was unreachable until their leases lapsed, so close() stopped reconnecting; ` +
          'the stalled sweep recovers them (a stall counted) and they run again'
      : `${closed} not yet recorded (done as sent if Redis answers within lockDuration; otherwise the sweep recovers ` +
          'them as stalled, and they run again)',
  )
}

/** close(): see above. Settles once the worker has closed (or given up on what Redis has not answered). */
export async function closeWorker(core: RunContext): Promise<void> {
  const { clock, closeTimeout, lockDuration } = core.settings
  // How long to wait for running jobs: Infinity (no closeTimeout), closeTimeout, or 0 (close(true)).
  const waitMs = core.force ? 0 : (closeTimeout ?? Number.POSITIVE_INFINITY)
  const deadline = clock.now() + waitMs
  const left = () => Math.max(0, deadline - clock.now())
  const within = (work: Promise<unknown>, ms: number) => settlesWithin(clock, work, ms)

  stopTaking(core)
  const linkUp = core.conn.client.status === 'ready'
  if (linkUp || core.runs.size > 0) await within(core.loopDone, left())
  const lapsed = await waitForRuns(core, left)

  const end = clock.now() + CLOSE_MARGIN_MS
  const rest = () => Math.max(0, end - clock.now())
  if (active(core).length > 0) {
    core.phase = 'abandoning'
    abortRunning(core)
    while (active(core).length > 0 && rest() > 0) await within(Promise.all(active(core).map((r) => r.done)), rest())
    const abandoned = abandonRunning(core)
    if (abandoned > 0) {
      const why = waitMs === 0 ? 'close(true) does not wait for them' : `closeTimeout (${waitMs} ms) passed`
      core.report(
        new EchoMQError(
          'ERR_CLOSED',
          `worker for queue ${core.name} closed with ${abandoned} job(s) still running (${why}): they were not put back in ` +
            'line while their processor runs; their leases lapse and the stalled sweep recovers them (a stall counted)',
        ),
      )
    }
  }
  // Each awaited round ends with the set changed (tracked calls remove themselves), or gives up.
  while (core.calls.size > 0 && rest() > 0) if (!(await within(core.calls.settled(), rest()))) break
  for (const stopped of stopHelpers(core)) await within(stopped, rest())

  const pending = () => Promise.allSettled([core.loopDone, core.calls.settled()])
  if (await within(pending(), linkUp ? rest() : 0)) {
    if (!(await within(closeLink(core), rest()))) dropConnection(core.conn)
    core.phase = 'closed'
    return
  }
  const finishing = [...core.runs.values()].filter((run) => run.phase === 'finishing').length
  if (finishing > 0) core.report(unrecorded(core, finishing, lapsed))
  core.phase = 'closed'
  // A link that is down answers nothing: waiting would hold the process for a lease while ioredis
  // reconnects. Its unanswered calls fail now; whatever a take lost in the drop had reserved goes back
  // to `wait` unstarted with the next sweep (a reservation, not a run: no attempt, no stall).
  if (core.conn.client.status !== 'ready') return dropConnection(core.conn)
  // Calls still unanswered (a stalled link) keep the connection until they settle, so a job a late take
  // returns is handed back; at most one lease later, when the lease would have lapsed anyway.
  void within(pending(), lockDuration)
    .then(() => within(closeLink(core), CLOSE_MARGIN_MS))
    .finally(() => dropConnection(core.conn))
}
