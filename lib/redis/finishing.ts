/**
 * A run's finish: finish-16.lua completes, fails or releases runs and takes the next jobs in the same call.
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import type { JobState } from '../job.js'
import type { RedisClient } from './connection.js'
import { flowKeys, type QueueKeys } from './keys.js'
import { evalScript, type NextDue, nextDue, prioritizedKeys } from './script-runner.js'
import {
  type Handed,
  type HandedReply,
  type Lease,
  limitArgs,
  TAKE_MAX_BYTES,
  type Taken,
  type TakenReply,
  type Taker,
  toHanded,
  toTaken,
} from './taking.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const FINISH_SCRIPTS = {
  finish: 'finish-16.lua',
} as const

/**
 * complete; fail (uses an attempt; a retry waits the job's backoff); fail-final (an UnrecoverableError: to
 * `failed` whatever attempts remain); release (back to wait, served next, no attempt used).
 */
export type FinishAction = 'complete' | 'fail' | 'fail-final' | 'release'

/** A finished set past its retention plus slack: the caller runs `trim` on it. */
export type FinishedSet = 'completed' | 'failed'

/**
 * How one run ended: `lost` when it no longer owned the job (nothing changed for it); `parent` when nothing
 * changed because its job became a flow's parent while it ran and the run would remove it at once: sent
 * again with FinishRun.parent, it goes with its flow keys; `next` when nothing changed because an add stored
 * a next job for the deduplication id its job holds (keepLastIfActive): sent again with FinishRun.next,
 * the finish adds that job (see againWith).
 */
export interface RunOutcome {
  status: 'ok' | 'lost' | 'parent' | 'next'
  /** With `next`: the id of the job stored as the deduplication id's next. */
  next?: string
  state: JobState | 'missing'
  /** A finished set that has just grown past its retention by another slack: trim it. */
  trim: FinishedSet | undefined
  /** With `trim`: that set's oldest ids, read by the same call (the trim's first candidates). */
  oldest?: string[]
  /** A flow's child ended: the entry it left for its parent (lib/flows/handoffs.ts delivers it). */
  handoff: string | undefined
  /** A failed run's retry waits this backoff (ms) in `delayed`; undefined otherwise. */
  backoffMs?: number
}

/** One run a finish call ends. */
export interface FinishRun {
  run: Lease
  action: FinishAction
  /** The result (JSON text) to complete with, or the error message to fail with. */
  value: string
  /** The error's stack, for a failure. */
  stack?: string
  /**
   * For a failure, instead of `stack`: the job's stacktrace with this run's stack, as it is to be stored (JSON
   * text; "" to leave it as it is). The worker has the stored list (the take sent it), and one the script
   * builds costs Redis every byte of the stack three more times (cjson's escaping, the list's brackets, each
   * string hashed by Lua).
   */
  stacks?: string
  /** A fail's retry waits this (ms), not the job's backoff: the worker's settings.backoffStrategy said so. */
  delayMs?: number
  /** The worker's retention (encodeKeep), for a job with none of its own. */
  keep?: string
  /**
   * The job, as taken, had none of the fields a finish reads besides the token (Taken.plain): its finish
   * reads the token alone. Unset: it reads them all.
   */
  plain?: boolean
  /**
   * The job is a flow's parent (Taken.parent, or a `parent` outcome): a run that may remove it at once (not a
   * release, nor a completion `kept`) sends its four flow keys, to go with it.
   */
  parent?: boolean
  /** The id of the job an add stored as its deduplication id's next (a `next` outcome): its key goes along. */
  next?: string
  /**
   * A completed job stays filed: neither its retention nor `keep` is "remove at once" (its log's key then
   * need not travel). Unset: the script is told nothing, and decides.
   */
  kept?: boolean
}

export interface FinishManyResult extends NextDue {
  /** Per run, in the order given. */
  runs: RunOutcome[]
  /** Jobs taken in the same call. */
  taken: Taken[]
  /** Candidates left where they were because the reply was full (TAKE_MAX_BYTES) or the limiter held them. */
  left: string[]
  /** Ids reserved for this worker's next calls, next to be served first. */
  reserved: string[]
  /** Ids at the head of the line after the call (not reserved), next first: candidates for the next one. */
  peeked: string[]
  /** When the runs ended (ms, Redis's clock). */
  finishedOn: number
  /** ms to wait before taking again (the limiter, or queue.rateLimit), 0 for none, -1 while paused, MAXED at the global concurrency. */
  waitMs: number
  /** Jobs read into the hand (still reserved: taken only by the call that follows their start). */
  handed: Handed[]
  /** Per start confirmed, in the order given: taken, or lost (its reservation was gone). */
  confirmed: ('taken' | 'lost')[]
}

/** A single run's finish: its outcome with what the call took and set aside. */
export type FinishResult = Omit<FinishManyResult, 'runs'> & RunOutcome

/** What a finish takes in the same call, and what it sets aside for the calls after it. */
export interface TakeNext extends Taker {
  candidates: string[]
  /** The candidates are ids this worker reserved (else ids read from `wait`). */
  reservedCandidates: boolean
  /** Ids to reserve from the tail of `wait` for the next calls, and for how long (ms). */
  reserve: number
  reserveMs: number
  /** Ids to peek at from the tail of `wait`, without reserving them. */
  peek: number
  /** Reserved ids to read into the hand (neither taken nor leased until they start). */
  hand?: string[]
  /** Jobs started from the hand since the last call: taken now, each under the token it was read with. */
  starts?: (Lease & { scored: boolean })[]
}

const NOTHING_NEXT: TakeNext = {
  workerToken: '',
  leaseMs: 1,
  workerName: '',
  candidates: [],
  reservedCandidates: false,
  reserve: 0,
  reserveMs: 1,
  peek: 0,
}

/**
 * Completes, fails or releases runs of one worker, each fenced by its token, in one call (lua/finish-16.lua),
 * and takes the next jobs in the same call.
 */
export async function finishRuns(
  client: RedisClient,
  keys: QueueKeys,
  runs: FinishRun[],
  next: TakeNext = NOTHING_NEXT,
): Promise<FinishManyResult> {
  const k = keys
  const keyList = [
    k.active,
    k.stalled,
    k.wait,
    k.completed,
    k.failed,
    k.marker,
    k.delayed,
    k.meta,
    k.reserved,
    k.events,
    k.listened,
    k.metrics,
    ...prioritizedKeys(keys),
    k.limiter,
    k.handoffs,
  ]
  const args: (string | number)[] = [
    runs.length,
    Math.random(),
    next.workerToken,
    next.leaseMs,
    next.workerName,
    TAKE_MAX_BYTES,
    next.reservedCandidates ? 'r' : 'w',
    next.reserve,
    next.reserveMs,
    next.peek,
    ...limitArgs(next),
    next.hand?.length ?? 0,
    next.starts?.length ?? 0,
  ]
  const hand = next.hand ?? []
  const starts = next.starts ?? []
  const wt = next.workerToken
  args.push(next.candidates.length + hand.length)
  for (const id of next.candidates) keyList.push(k.job(id), k.lock(id))
  for (const id of hand) keyList.push(k.job(id))
  for (const s of starts) {
    keyList.push(k.job(s.id), k.lock(s.id))
    args.push(sentToken(s.token, wt), s.scored ? '1' : '0')
  }
  for (const r of runs) pushRun(keys, keyList, args, r, wt)
  const reply = (await evalScript(client, FINISH_SCRIPTS.finish, keyList, args)) as [
    string,
    (RunDetail | number | string)[] | null,
    TakenReply | null,
    string[] | null,
    string[] | null,
    string[] | null,
    number,
    number,
    number,
    number,
    HandedReply | null,
    string,
    number,
  ]
  // An empty list comes back as a null (finish-16.lua listOrNull).
  const [codes, details, taken, reserved, peeked, left, dueIn, dueAt, finishedOn, waitMs, handed, confirmed, now] = reply
  return {
    runs: outcomesOf(codes, details ?? []),
    taken: toTaken(taken ?? [], now, next),
    left: left ?? [],
    reserved: reserved ?? [],
    peeked: peeked ?? [],
    ...nextDue(dueIn, dueAt),
    finishedOn,
    waitMs,
    handed: toHanded(handed ?? [], now, finishedOn, next),
    confirmed: Array.from(confirmed, (code) => (code === '1' ? 'taken' : 'lost')),
  }
}

/**
 * A run's KEYS and ARGV (finish-16.lua's header says which): a completed job kept sends no log key, a first
 * start no number, a job that is no parent (or a release) no flow keys.
 */
function pushRun(keys: QueueKeys, keyList: string[], args: (string | number)[], r: FinishRun, workerToken: string): void {
  const id = r.run.id
  const code = ACTION_CODES[r.action]
  const overrides = `${r.delayMs === undefined ? '' : `@${r.delayMs}`}${r.keep === undefined ? '' : `#${r.keep}`}`
  const kept = r.action === 'complete' && r.kept === true
  const flows = r.parent === true && !kept && r.action !== 'release'
  if (kept) keyList.push(keys.job(id), keys.lock(id))
  else keyList.push(keys.job(id), keys.lock(id), keys.logs(id))
  if (flows) keyList.push(...flowKeys(keys, id))
  if (r.next !== undefined) keyList.push(keys.job(r.next))
  const start = startOf(r.run.token, workerToken)
  const encoded = r.stacks !== undefined && (code === 'f' || code === 'F')
  const marks = `${r.plain === true ? '' : '+'}${encoded ? '$' : ''}${flows ? '&' : ''}${r.next === undefined ? '' : '^'}${overrides}`
  if (start === undefined) args.push(`${kept ? 'c' : code}!${marks}`, r.run.token, r.value)
  else args.push(`${kept ? 'c' : code}${start === '1' ? '' : start}${marks}`, r.value)
  if (code === 'f' || code === 'F') args.push(encoded ? (r.stacks as string) : (r.stack ?? ''))
}

/**
 * A run's outcome as finish-16.lua details it (one that completed with nothing more to say is a "c"): its
 * backoff is null when its set's oldest ids follow it without one.
 */
type RunDetail = ['ok' | 'lost', JobState | 'missing', FinishedSet | '', string, (number | null)?, string[]?]

/**
 * The runs' outcomes, in order, from the reply's codes (one per run) and its details (one per ".", a
 * backoff per "d": a retry in `delayed`; "w": back in `wait`; "p": nothing changed, send it again as a
 * parent's).
 */
function outcomesOf(codes: string, details: (RunDetail | number | string)[]): RunOutcome[] {
  let detail = 0
  const outcomes: RunOutcome[] = []
  for (const code of codes) {
    if (code === 'c') {
      outcomes.push(COMPLETED())
      continue
    }
    if (code === 'h') {
      outcomes.push({ ...COMPLETED(), handoff: details[detail++] as unknown as string })
      continue
    }
    if (code === 'p') {
      outcomes.push({ status: 'parent', state: 'active', trim: undefined, handoff: undefined })
      continue
    }
    if (code === 'n') {
      outcomes.push({ status: 'next', state: 'active', trim: undefined, handoff: undefined, next: String(details[detail++]) })
      continue
    }
    if (code === 'w' || code === 'd') {
      const state = code === 'w' ? 'wait' : 'delayed'
      const backoff = code === 'd' ? { backoffMs: details[detail++] as number } : {}
      outcomes.push({ status: 'ok', state, trim: undefined, handoff: undefined, ...backoff })
      continue
    }
    const [status, state, trim, handoff, backoffMs, oldest] = details[detail++] as RunDetail
    outcomes.push({
      status,
      state,
      trim: trim === '' ? undefined : trim,
      handoff: handoff === '' ? undefined : handoff,
      ...(backoffMs === undefined || backoffMs === null ? {} : { backoffMs }),
      ...(oldest === undefined || trim === '' ? {} : { oldest }),
    })
  }
  return outcomes
}

/**
 * The run to send again when its outcome changed nothing but asked for more keys (`parent`: its flow keys;
 * `next`: the key of its deduplication id's next job), else undefined.
 */
function againWith(run: FinishRun, outcome: RunOutcome | undefined): FinishRun | undefined {
  if (outcome?.status === 'parent' && run.parent !== true) return { ...run, parent: true }
  if (outcome?.status === 'next' && outcome.next !== undefined) return { ...run, next: outcome.next }
  return undefined
}

/** How many times a run's finish is sent at most (see sendAsAsked). */
export const MAX_FINISH_SENDS = 4

/**
 * Sends a run's finish with `send`, then again with the keys each reply asked for (againWith: the job became a
 * flow's parent while it ran and the finish would remove it at once, or its deduplication id has a next job),
 * at most MAX_FINISH_SENDS times in all. Returns the last reply and the run as it was last sent.
 */
export async function sendAsAsked<R>(
  run: FinishRun,
  send: (run: FinishRun) => Promise<R>,
  outcomeOf: (reply: R) => RunOutcome | undefined,
): Promise<{ reply: R; sent: FinishRun }> {
  let sent = run
  let reply = await send(sent)
  for (let sends = 1; sends < MAX_FINISH_SENDS; sends++) {
    const again = againWith(sent, outcomeOf(reply))
    if (!again) break
    sent = again
    reply = await send(sent)
  }
  return { reply, sent }
}

/** The actions as finish-16.lua reads them ("C": complete, its log's key sent; "c" for a job kept, see FinishRun.kept). */
const ACTION_CODES: Record<FinishAction, string> = { complete: 'C', fail: 'f', 'fail-final': 'F', release: 'r' }

/** A run that completed with nothing more to say (finish-16.lua's "c"). */
const COMPLETED = (): RunOutcome => ({ status: 'ok', state: 'completed', trim: undefined, handoff: undefined })

/** The start number of a run of the calling worker ("<workerToken>:<n>"), else undefined (its token is sent whole). */
function startOf(token: string, workerToken: string): string | undefined {
  if (workerToken === '' || !token.startsWith(`${workerToken}:`)) return undefined
  const n = token.slice(workerToken.length + 1)
  return /^\d+$/.test(n) ? n : undefined
}

/**
 * A start's token as a call sends it: the start number alone for a run of the calling worker (its token
 * travels once per call, ARGV[3]), else whole (takeJobs.lua tokenOf tells them apart by the ':').
 */
const sentToken = (token: string, workerToken: string): string =>
  workerToken !== '' && token.startsWith(`${workerToken}:`) && !token.includes(':', workerToken.length + 1)
    ? token.slice(workerToken.length + 1)
    : token

/** Completes, fails or releases one run, fenced by its token; may take the next jobs in the same call. */
export async function finish(
  client: RedisClient,
  keys: QueueKeys,
  run: Lease,
  action: FinishAction,
  value: string,
  next: TakeNext = NOTHING_NEXT,
  stack = '',
): Promise<FinishResult> {
  const { runs, ...rest } = await finishRuns(client, keys, [{ run, action, value, stack }], next)
  return { ...rest, ...(runs[0] as RunOutcome) }
}
