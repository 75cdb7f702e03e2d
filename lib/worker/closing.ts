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
 * does not wait for one.
 */
import { type Clock, settlesWithin } from '../clock.js'
import { EchoMQError } from '../errors.js'
import { CLOSE_MARGIN_MS } from '../options.js'
import type { InFlight } from './in-flight.js'

/**
 * A run's phase, as close() sees it: `running` and `finishing` ones are waited for; `lost` ones are no
 * longer this worker's; `abandoned` ones close() gave up on (their outcome is not recorded); `moved` ones
 * ended with job.moveToDelayed (their job is in `delayed`, no finish follows).
 */
export type RunPhase = 'running' | 'finishing' | 'lost' | 'abandoned' | 'moved'

/** The worker, as closing sees it. */
export interface Closable {
  readonly queue: string
  readonly clock: Clock
  /** How long to wait for running jobs: Infinity (no closeTimeout), closeTimeout, or 0 (close(true)). */
  readonly waitMs: number
  readonly lockDuration: number
  /** Stops taking jobs: the loop ends, an idle wait is cut short. */
  stopTaking(): void
  /** The take loop, which may be waiting on a take over a stalled link. */
  readonly loopDone: Promise<void>
  linkUp(): boolean
  /** The runs still here. */
  runs(): { phase: RunPhase; done: Promise<void> }[]
  /** Aborts the signal of every running run (its processor is asked to stop). */
  abortRunning(): void
  /** Gives up on the runs still running: their leases lapse, the sweep recovers their jobs. Returns how many. */
  abandonRunning(): number
  readonly calls: InFlight
  /** Stops the helpers with timers; each promise settles when it has. */
  stopHelpers(): Promise<unknown>[]
  closeConnection(): Promise<void>
  disconnect(): void
  report(err: EchoMQError): void
  enter(phase: 'abandoning' | 'closed'): void
}

const active = (w: Closable) => w.runs().filter((r) => r.phase === 'running' || r.phase === 'finishing')

export async function closeWorker(w: Closable): Promise<void> {
  const { clock } = w
  const deadline = clock.now() + w.waitMs
  const left = () => Math.max(0, deadline - clock.now())
  const within = (work: Promise<unknown>, ms: number) => settlesWithin(clock, work, ms)

  w.stopTaking()
  const linkUp = w.linkUp()
  if (linkUp || w.runs().length > 0) await within(w.loopDone, left())
  while (active(w).length > 0 && left() > 0) await within(Promise.all(active(w).map((r) => r.done)), left())

  const end = clock.now() + CLOSE_MARGIN_MS
  const rest = () => Math.max(0, end - clock.now())
  if (active(w).length > 0) {
    w.enter('abandoning')
    w.abortRunning()
    while (active(w).length > 0 && rest() > 0) await within(Promise.all(active(w).map((r) => r.done)), rest())
    const abandoned = w.abandonRunning()
    if (abandoned > 0) {
      const why = w.waitMs === 0 ? 'close(true) does not wait for them' : `closeTimeout (${w.waitMs} ms) passed`
      w.report(
        new EchoMQError(
          'ERR_CLOSED',
          `worker for queue ${w.queue} closed with ${abandoned} job(s) still running (${why}): they were not put back in ` +
            'line while their processor runs; their leases lapse and the stalled sweep recovers them (a stall counted)',
        ),
      )
    }
  }
  // Each awaited round ends with the set changed (tracked calls remove themselves), or gives up.
  while (w.calls.size > 0 && rest() > 0) if (!(await within(w.calls.settled(), rest()))) break
  for (const stopped of w.stopHelpers()) await within(stopped, rest())

  const pending = () => Promise.allSettled([w.loopDone, w.calls.settled()])
  if (await within(pending(), linkUp ? rest() : 0)) {
    if (!(await within(w.closeConnection(), rest()))) w.disconnect()
    w.enter('closed')
    return
  }
  const finishing = w.runs().filter((run) => run.phase === 'finishing').length
  if (finishing > 0) {
    w.report(
      new EchoMQError(
        'ERR_CONNECTION',
        `worker for queue ${w.queue} closed before Redis answered: ${finishing} finished job(s) not yet recorded (done as ` +
          'sent if Redis answers within lockDuration; otherwise the sweep recovers them as stalled, and they run again)',
      ),
    )
  }
  w.enter('closed')
  // A link that is down answers nothing: waiting would hold the process for a lease while ioredis
  // reconnects. Its unanswered calls fail now; whatever a take lost in the drop had reserved goes back
  // to `wait` unstarted with the next sweep (a reservation, not a run: no attempt, no stall).
  if (!w.linkUp()) return w.disconnect()
  // Calls still unanswered (a stalled link) keep the connection until they settle, so a job a late take
  // returns is handed back; at most one lease later, when the lease would have lapsed anyway.
  void within(pending(), w.lockDuration)
    .then(() => within(w.closeConnection(), CLOSE_MARGIN_MS))
    .finally(() => w.disconnect())
}
