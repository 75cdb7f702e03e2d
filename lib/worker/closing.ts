/**
 * How a worker closes, within closeTimeout + CLOSE_MARGIN_MS in every state (Redis up, down or stalled):
 *
 *   1. draining: no new job is taken; running jobs may finish until closeTimeout;
 *   2. releasing: jobs still running are aborted and returned to `wait` (served next, no attempt used);
 *      the calls in flight (finishes, returns) get the margin to be answered, and the helpers with timers
 *      (LockManager, promoter, take-ahead) stop;
 *   3. closed: the connection closes. When Redis has not answered in time, close() says how many jobs
 *      it could not return and how many finishes are unconfirmed (one ERR_CONNECTION error), and the
 *      connection stays open in the background for at most one lease, so a late reply (a take whose jobs
 *      must go back) is still handled.
 *
 * With no job running and no connection up (Redis down, or never reached), nothing can end before the
 * deadline, so close() does not wait for one.
 */
import { type Clock, settlesWithin } from '../clock.js'
import { EchoMQError } from '../errors.js'
import { CLOSE_MARGIN_MS } from '../options.js'
import type { InFlight } from './in-flight.js'

/** What close() keeps of its margin for the work after its last wait (timers fire a little late). */
const CLOSE_SLACK_MS = 50

/** A run's phase, as close() sees it: only `running` runs are released; `finishing` ones end as their call says. */
export type RunPhase = 'running' | 'finishing' | 'lost' | 'released'

/** The worker, as closing sees it. */
export interface Closable {
  readonly queue: string
  readonly clock: Clock
  readonly closeTimeout: number
  readonly lockDuration: number
  /** Stops taking jobs: the loop ends, an idle wait is cut short. */
  stopTaking(): void
  /** The take loop, which may be waiting on a take over a stalled link. */
  readonly loopDone: Promise<void>
  linkUp(): boolean
  /** The runs still here. */
  runs(): { phase: RunPhase; done: Promise<void> }[]
  /** Aborts every running run and returns its job to `wait` (tracked in `calls`). */
  releaseRunning(): void
  readonly calls: InFlight
  /** Stops the helpers with timers; each promise settles when it has. */
  stopHelpers(): Promise<unknown>[]
  closeConnection(): Promise<void>
  disconnect(): void
  /** Runs released whose return Redis has not confirmed. */
  unreturned(): number
  report(err: EchoMQError): void
  enter(phase: 'releasing' | 'closed'): void
}

export async function closeWorker(w: Closable): Promise<void> {
  const { clock } = w
  const deadline = clock.now() + w.closeTimeout
  // Nothing waits past this: the documented bound, less a little for the steps that follow a wait.
  const hardEnd = deadline + CLOSE_MARGIN_MS - CLOSE_SLACK_MS
  const left = () => Math.max(0, deadline - clock.now())
  const within = (work: Promise<unknown>, ms: number) => settlesWithin(clock, work, ms)

  w.stopTaking()
  const linkUp = w.linkUp()
  if (linkUp || w.runs().length > 0) await within(w.loopDone, left())
  while (w.runs().length > 0 && left() > 0) await within(Promise.all(w.runs().map((r) => r.done)), left())

  w.enter('releasing')
  const end = Math.min(clock.now() + CLOSE_MARGIN_MS, hardEnd)
  const rest = () => Math.max(0, end - clock.now())
  w.releaseRunning()
  // Each awaited round ends with the set changed (tracked calls remove themselves), or gives up.
  while (w.calls.size > 0 && rest() > 0) if (!(await within(w.calls.settled(), rest()))) break
  for (const stopped of w.stopHelpers()) await within(stopped, rest())

  const pending = () => Promise.allSettled([w.loopDone, w.calls.settled()])
  if (await within(pending(), linkUp ? rest() : 0)) {
    if (!(await within(w.closeConnection(), rest()))) w.disconnect()
    w.enter('closed')
    return
  }
  // Runs whose finish (complete or fail) is still unanswered end as it says if Redis answers in time.
  const finishing = w.runs().filter((run) => run.phase === 'finishing').length
  const unreturned = w.unreturned()
  if (unreturned + finishing > 0) {
    w.report(
      new EchoMQError(
        'ERR_CONNECTION',
        `worker for queue ${w.queue} closed before Redis answered: ${unreturned} running job(s) not yet returned to wait ` +
          `and ${finishing} finished job(s) not yet recorded (done as sent, without using an attempt for a return, if Redis ` +
          'answers within lockDuration; otherwise the sweep recovers them as stalled, and a finished one runs again)',
      ),
    )
  }
  w.enter('closed')
  // Calls still unanswered (a stalled link) keep the connection until they settle, so a job a late take
  // returns is handed back; at most one lease later, when the lease would have lapsed anyway.
  void within(pending(), w.lockDuration)
    .then(() => within(w.closeConnection(), CLOSE_MARGIN_MS))
    .finally(() => w.disconnect())
}
