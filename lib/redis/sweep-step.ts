/**
 * One step of the two-phase stalled sweep (sweep-11.lua): its KEYS and ARGV order, and its reply as named
 * results. lib/sweep.ts walks a queue's candidates with it.
 */
import type { RedisClient } from './connection.js'
import { flowKeys, type QueueKeys } from './keys.js'
import { evalScript, eventKeys } from './script-runner.js'
import { pairs, SWEEP_SCRIPTS } from './sweeping.js'

export interface SweepStepRequest {
  graceMs: number
  /** `deadline`: candidates in lease-deadline order, a live deadline ends the step; `audit`: any window. */
  mode: 'deadline' | 'audit'
  ids: string[]
  /** In the deadline walk: the next page's size (0: none), and the candidates before this step left in place. */
  page?: { size: number; passed: number }
}

export interface SweepStepResult {
  marked: string[]
  recovered: string[]
  failed: string[]
  /** Candidates still in `active` where they were (marked, or within grace). */
  left: number
  /** A live deadline was reached: no later candidate in the index can be stalled. */
  done: boolean
  /** `failed` is past its retention plus slack. */
  trimFailed: boolean
  /** The walk's next candidates, when a page was asked for and this step neither was short nor reached a live deadline. */
  next: string[]
  /** The lease deadline (ms) of the first job this step recovered in the deadline walk. */
  firstRecoveredDeadline: number | undefined
  /** Flow hand-offs this step wrote (children failed past the stall allowance): id -> entry. */
  handoffs: [string, string][]
  /** The jobs this step failed, as they were: id -> their hash (one its retention of 0 removed is gone after). */
  failedJobs: [string, Record<string, string>][]
}

type SweepReply = [string[], string[], string[], number, number, number, string[], string | null, string[], string[], (string | string[])[]]

/** The reply's failed jobs, { id, [field, value, ...], ... }, as id -> hash. */
function jobHashes(flat: (string | string[])[]): [string, Record<string, string>][] {
  const out: [string, Record<string, string>][] = []
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const fields = flat[i + 1] as string[]
    const hash: Record<string, string> = {}
    for (let f = 0; f + 1 < fields.length; f += 2) hash[fields[f] as string] = fields[f + 1] as string
    out.push([flat[i] as string, hash])
  }
  return out
}

/**
 * One bounded step of the two-phase sweep over the given candidates. A flow's parent that the step would
 * fail and remove at once (a retention of 0 in `failed`) is set apart by the script, as its flow keys did
 * not come with it; a second call ("parents") sends them, so they go with it.
 */
export async function sweepStep(
  client: RedisClient,
  keys: QueueKeys,
  { graceMs, mode, ids, page = { size: 0, passed: 0 } }: SweepStepRequest,
): Promise<SweepStepResult> {
  const call = (m: SweepStepRequest['mode'] | 'parents', some: string[], size: number, passed: number) => {
    const perJob =
      m === 'parents'
        ? (id: string) => [keys.job(id), keys.lock(id), keys.logs(id), ...flowKeys(keys, id)]
        : (id: string) => [keys.job(id), keys.lock(id), keys.logs(id)]
    return evalScript(
      client,
      SWEEP_SCRIPTS.sweepStep,
      [
        keys.active,
        keys.stalled,
        keys.wait,
        keys.failed,
        keys.marker,
        ...eventKeys(keys),
        keys.metrics,
        keys.prioritized,
        keys.handoffs,
        ...some.flatMap(perJob),
      ],
      [graceMs, m, size, passed, ...some],
    ) as Promise<SweepReply>
  }
  const [marked, recovered, failed, left, done, trim, next, first, handoffs, parents, removed] = await call(
    mode,
    ids,
    page.size,
    page.passed,
  )
  const result: SweepStepResult = {
    handoffs: pairs(handoffs),
    failedJobs: jobHashes(removed),
    marked,
    recovered,
    failed,
    left,
    done: done === 1,
    trimFailed: trim === 1,
    next,
    firstRecoveredDeadline: first === null ? undefined : Number(first),
  }
  if (parents.length === 0) return result
  // The walk's page was read with the parents still in `active`; those the second call takes out of it no
  // longer count among the candidates left in place.
  const [markedAgain, again, failedAgain, leftAgain, , trimAgain, , firstAgain, handoffsAgain, , removedAgain] = await call(
    'parents',
    parents,
    0,
    0,
  )
  result.marked.push(...markedAgain)
  result.recovered.push(...again)
  result.failed.push(...failedAgain)
  result.left += leftAgain - parents.length
  result.trimFailed ||= trimAgain === 1
  result.handoffs.push(...pairs(handoffsAgain))
  result.failedJobs.push(...jobHashes(removedAgain))
  if (firstAgain !== null) result.firstRecoveredDeadline = Math.min(Number(firstAgain), result.firstRecoveredDeadline ?? Number(firstAgain))
  return result
}
