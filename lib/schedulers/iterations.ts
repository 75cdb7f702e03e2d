/**
 * A job scheduler's runs, made by whoever advances the schedule (lua/iterate-11.lua), so that both of its
 * promises hold:
 *   - with no worker, every period becomes a job: when its next period falls due, the sweep (or a worker's
 *     promoter) puts it into line together with every period due since, up to the catch-up limit
 *     (timing.ts duePeriods: the last CATCH_UP_MS, at most CATCH_UP_MAX_RUNS), oldest first, in calls of
 *     at most ITERATE_MAX_RUNS runs;
 *   - while workers keep up, one run is pending, as in BullMQ: the next run is made (in `delayed`) when a
 *     worker starts one (`startedRun`, from the worker's promoter), not when the one before falls due.
 * Plain delayed jobs move to `wait` in batches (lua/promote-7.lua). An operator's early promotion
 * (queue.promoteJob) puts a pending run into line and moves the schedule on. Every call re-checks the
 * scheduler is as read (its next period and newest run), and ids are deterministic: overlapping sweeps and
 * workers never make a run twice.
 */
import { ITERATE_MAX_RUNS, type IterateRequest, iterate, type Promoted, promote } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { anyIteration, parseIteration } from '../redis/iteration-id.js'
import type { QueueKeys } from '../redis/keys.js'
import { readScheduler, type StoredScheduler, serverTimeMs } from '../redis/queries.js'
import { duePeriods, successorDue, timingFromHash } from './timing.js'

export { parseIteration } from '../redis/iteration-id.js'

/** Tries of an advance that another one raced (each re-reads the scheduler). */
const RACE_TRIES = 5

/** What promoting due jobs did: how many jobs moved from `delayed`, the runs made straight into line, the next due time. */
export interface Promotion extends Promoted {
  made: string[]
}

/**
 * Moves the due jobs among `ids` (the earliest in `delayed`) into line and advances the schedulers in
 * `schedulerIds` (whose next period is due) and those of the iterations among `ids`; `rearm` leaves the
 * next due time in the marker for an idle worker. Resolves to what moved and when the next delayed job is due.
 */
export async function promoteDue(
  client: RedisClient,
  keys: QueueKeys,
  ids: string[],
  rearm: boolean,
  schedulerIds: string[] = [],
): Promise<Promotion> {
  const plain: string[] = []
  const iterations: string[] = []
  const sids = new Set(schedulerIds)
  const now = anyIteration(ids) ? await serverTimeMs(client) : 0
  for (const id of ids) {
    const it = parseIteration(id)
    // Only a due one moves its schedule: the others are read for nothing (the candidates are the earliest
    // delayed ids, due or not).
    if (it && it.due <= now) sids.add(it.schedulerId)
    ;(it ? iterations : plain).push(id)
  }
  const promoted: string[] = []
  const made: string[] = []
  for (const sid of sids) {
    const step = await advance(client, keys, sid, 'due')
    promoted.push(...step.promoted)
    made.push(...step.made)
  }
  // An iteration its scheduler no longer points at (it ended, or was replaced) is a delayed job like any
  // other. Last, so its answer (the next due time) counts the runs just made.
  const rest = await promote(client, keys, [...plain, ...iterations.filter((id) => !promoted.includes(id))], rearm)
  return { ...rest, promoted: promoted.length + rest.promoted, made }
}

/**
 * Promotes a scheduler's pending run now, due or not (queue.promoteJob): the schedule moves on as when it
 * falls due. Resolves to false when `id` is not a pending run in `delayed`.
 */
export async function promoteIterationNow(client: RedisClient, keys: QueueKeys, id: string): Promise<boolean> {
  const it = parseIteration(id)
  if (!it) return false
  return (await advance(client, keys, it.schedulerId, 'early', it.due)).promoted.includes(id)
}

/**
 * A worker started job `id`: when it is a scheduler's run, the schedule's next run is made now, in
 * `delayed` (and any period already due goes into line first). Resolves to that run's due time (ms,
 * Redis's clock) and how far off it is, when one was made.
 */
export async function startedRun(client: RedisClient, keys: QueueKeys, id: string): Promise<{ at: number; inMs: number } | undefined> {
  const it = parseIteration(id)
  if (!it) return undefined
  const step = await advance(client, keys, it.schedulerId, 'take')
  const at = step.madeDelayed === undefined ? undefined : parseIteration(step.madeDelayed)?.due
  return at === undefined ? undefined : { at, inMs: Math.max(0, at - step.now) }
}

interface Advanced {
  promoted: string[]
  made: string[]
  madeDelayed: string | undefined
  /** Redis's clock when the scheduler was read (ms). */
  now: number
}

type Mode = IterateRequest['mode']

/** Advances scheduler `sid` (see above); `early` names the pending run's due time. */
async function advance(client: RedisClient, keys: QueueKeys, sid: string, mode: Mode, early?: number): Promise<Advanced> {
  const out: Advanced = { promoted: [], made: [], madeDelayed: undefined, now: 0 }
  for (let tries = 0; tries < RACE_TRIES; tries++) {
    const [s, now] = await Promise.all([readScheduler(client, keys, sid), serverTimeMs(client)])
    out.now = now
    const calls = s && plan(sid, s, now, mode, early)
    if (!calls) return out
    let raced = false
    for (const call of calls) {
      const step = await iterate(client, keys, call)
      if (step.retry) {
        raced = true
        break
      }
      out.promoted.push(...step.promoted)
      out.made.push(...step.made)
      out.madeDelayed = step.madeDelayed ?? out.madeDelayed
      if (step.ended) return out
    }
    if (!raced) return out
  }
  // Still racing others that advance it: they do the rest, or the next promotion or sweep does.
  return out
}

/** The calls that advance stored scheduler `s` at Redis's time `now`; undefined when there is nothing to do. */
function plan(sid: string, s: StoredScheduler, now: number, mode: Mode, early?: number): IterateRequest[] | undefined {
  const t = timingFromHash(s.hash)
  const made = s.last === s.next
  if (mode === 'early') {
    // Only the run the scheduler points at, made and not yet due; one due already is advanced as due.
    if (s.next !== early || !made) return undefined
    if (s.next > now) return [{ schedulerId: sid, next: s.next, last: s.last, mode, runs: [], after: successorDue(t, s.next) }]
  } else if (s.next > now) {
    // Nothing due: a started run makes the next one, unless it is made already.
    if (mode === 'due' || made) return undefined
    return [{ schedulerId: sid, next: s.next, last: s.last, mode, runs: [], after: s.next }]
  }
  const { due, after } = duePeriods(t, s.next, now)
  const calls: IterateRequest[] = []
  let next = s.next
  let last = s.last
  for (let i = 0; i === 0 || i < due.length; i += ITERATE_MAX_RUNS) {
    const runs = due.slice(i, i + ITERATE_MAX_RUNS)
    const following = due[i + ITERATE_MAX_RUNS]
    // Between two calls the scheduler points at the first run of the next call, not made yet.
    const final = following === undefined
    calls.push({ schedulerId: sid, next, last, mode: final && mode === 'take' ? 'take' : 'due', runs, after: final ? after : following })
    if (!final) next = following
    last = runs.at(-1) ?? last
  }
  return calls
}
