/**
 * Job schedulers: schedule-14.lua creates or changes one, iterate-11.lua advances it, unschedule-12.lua
 * removes it.
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import { EchoMQError } from '../errors.js'
import type { RedisClient } from './connection.js'
import { iterationId } from './iteration-id.js'
import type { QueueKeys } from './keys.js'
import { evalScript, eventKeys } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const SCHEDULE_SCRIPTS = {
  schedule: 'schedule-14.lua',
  iterate: 'iterate-11.lua',
  unschedule: 'unschedule-12.lua',
} as const

/** What an upsert or a removal read of a scheduler, which the script checks is still so. */
export interface SchedulerRead {
  /** Its next period (ms). */
  next: number
  /** Its newest run's due time (ms). */
  last: number
}

export interface ScheduleRequest {
  id: string
  /** The scheduler as read before (undefined: it did not exist). */
  read: SchedulerRead | undefined
  firstDue: number
  /** The period after the first, used when the first is due at once; undefined for none. */
  secondDue: number | undefined
  /** Keep the newest run (the timing is unchanged). */
  keep: boolean
  /** The scheduler hash's fields, name and value in turn. */
  fields: string[]
}

/** Creates or changes a job scheduler and its first run; 'retry' when another call moved it meanwhile. */
export async function schedule(
  client: RedisClient,
  keys: QueueKeys,
  r: ScheduleRequest,
): Promise<{ firstId: string; now: number } | 'retry'> {
  const newestId = r.read === undefined ? '' : iterationId(r.id, r.read.last)
  const firstId = iterationId(r.id, r.firstDue)
  const reply = (await evalScript(
    client,
    SCHEDULE_SCRIPTS.schedule,
    [
      keys.schedulers,
      keys.scheduler(r.id),
      keys.delayed,
      keys.wait,
      keys.marker,
      ...eventKeys(keys),
      keys.prioritized,
      keys.job(newestId || firstId),
      keys.logs(newestId || firstId),
      keys.job(firstId),
      keys.reserved,
      keys.reservedScores,
    ],
    [
      r.id,
      r.read === undefined ? '' : String(r.read.next),
      r.read === undefined ? '' : String(r.read.last),
      newestId,
      r.firstDue,
      firstId,
      r.secondDue ?? -1,
      r.keep ? 'keep' : '',
      ...r.fields,
    ],
  )) as ['retry'] | ['ok', string, number]
  return reply[0] === 'retry' ? 'retry' : { firstId: reply[1], now: reply[2] }
}

/**
 * Most runs one iterate-11.lua call makes: each is a key and two arguments (170 arguments in all) and
 * costs Redis about what adding one job does, so a call stays a fraction of a millisecond.
 */
export const ITERATE_MAX_RUNS = 50

export interface IterateRequest extends SchedulerRead {
  schedulerId: string
  /** `due`: its next period is due; `early`: its pending run goes into line now; `take`: a worker started one of its runs. */
  mode: 'due' | 'early' | 'take'
  /** Due times of the runs to make into line (at most ITERATE_MAX_RUNS, due by Redis's clock), oldest first. */
  runs: number[]
  /** The period after them; undefined for none (the schedule ends). */
  after: number | undefined
}

export interface Iterated {
  /** The scheduler moved meanwhile: nothing changed. */
  retry: boolean
  /** The scheduler is gone: nothing is left to make. */
  ended: boolean
  /** Runs moved from `delayed` into line: its pending run (and any other due run found there). */
  promoted: string[]
  /** Runs made straight into line. */
  made: string[]
  /** The run made in `delayed` (mode `take`). */
  madeDelayed: string | undefined
}

/** Advances a job scheduler (see iterate-11.lua) while it is as read. */
export async function iterate(client: RedisClient, keys: QueueKeys, r: IterateRequest): Promise<Iterated> {
  if (r.runs.length > ITERATE_MAX_RUNS) throw new EchoMQError('ERR_SCRIPT', `iterate makes at most ${ITERATE_MAX_RUNS} runs a call`)
  const sid = r.schedulerId
  const pendingId = iterationId(sid, r.next)
  const afterId = r.after === undefined ? '' : iterationId(sid, r.after)
  const reply = (await evalScript(
    client,
    SCHEDULE_SCRIPTS.iterate,
    [
      keys.schedulers,
      keys.scheduler(sid),
      keys.delayed,
      keys.wait,
      keys.marker,
      ...eventKeys(keys),
      keys.prioritized,
      keys.job(pendingId),
      keys.job(afterId || pendingId),
      ...r.runs.map((due) => keys.job(iterationId(sid, due))),
    ],
    [
      sid,
      String(r.next),
      String(r.last),
      r.mode,
      r.after ?? -1,
      pendingId,
      afterId,
      ...r.runs.flatMap((due) => [iterationId(sid, due), String(due)]),
    ],
  )) as ['retry'] | ['ok' | 'ended', string[], string[], string | null]
  if (reply[0] === 'retry') return { retry: true, ended: false, promoted: [], made: [], madeDelayed: undefined }
  const [status, promoted, made, madeDelayed] = reply
  return { retry: false, ended: status === 'ended', promoted, made, madeDelayed: madeDelayed ?? undefined }
}

/** Removes a job scheduler and its newest run if not started (see unschedule-12.lua); 'retry' when it moved meanwhile. */
export async function unschedule(
  client: RedisClient,
  keys: QueueKeys,
  schedulerId: string,
  read: SchedulerRead,
): Promise<boolean | 'retry'> {
  const newestId = iterationId(schedulerId, read.last)
  const reply = (await evalScript(
    client,
    SCHEDULE_SCRIPTS.unschedule,
    [
      keys.schedulers,
      keys.scheduler(schedulerId),
      keys.job(newestId),
      keys.logs(newestId),
      keys.delayed,
      keys.wait,
      keys.prioritized,
      ...eventKeys(keys),
      keys.reserved,
      keys.reservedScores,
    ],
    [schedulerId, String(read.next), String(read.last), newestId],
  )) as number | 'retry'
  return reply === 'retry' ? 'retry' : reply === 1
}
