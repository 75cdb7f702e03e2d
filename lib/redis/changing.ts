/**
 * Changing a job (lib/job-changes.ts) and releasing a deduplication hold.
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import type { JobState } from '../job.js'
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'
import { evalScript, eventKeys } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const CHANGE_SCRIPTS = {
  updateData: 'updateData-1.lua',
  changePriority: 'changePriority-5.lua',
  moveToDelayed: 'moveToDelayed-9.lua',
  changeDelay: 'changeDelay-6.lua',
  extendLock: 'extendLock-3.lua',
  unhold: 'unhold-2.lua',
} as const

/** Replaces a job's data (JSON text); "missing" when there is no such job. */
export async function updateData(client: RedisClient, keys: QueueKeys, id: string, data: string): Promise<'ok' | 'missing'> {
  return (await evalScript(client, CHANGE_SCRIPTS.updateData, [keys.job(id)], [data])) as 'ok' | 'missing'
}

/** Gives a job a new priority, filing it again when it waits; resolves to its state, or "missing". */
export async function changePriority(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  priority: number,
  lifo: boolean,
): Promise<{ status: 'ok' | 'missing'; state?: JobState }> {
  const [status, state] = (await evalScript(
    client,
    CHANGE_SCRIPTS.changePriority,
    [keys.job(id), keys.wait, keys.prioritized, keys.marker, keys.meta],
    [id, priority, lifo ? '1' : ''],
  )) as ['ok' | 'missing', JobState | undefined]
  return state === undefined ? { status } : { status, state }
}

/** What moveToDelayed found: moved (due at `due`, ms), or why it changed nothing. */
export type MoveToDelayedOutcome =
  | { status: 'ok'; due: number }
  | { status: 'missing' }
  | { status: 'lost' }
  | { status: 'not-active'; state: JobState | 'missing' }

/** Moves a job in flight to `delayed` until `timestamp` (ms), fenced by `token` ("" for any run). */
export async function moveToDelayed(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  token: string,
  timestamp: number,
): Promise<MoveToDelayedOutcome> {
  const reply = (await evalScript(
    client,
    CHANGE_SCRIPTS.moveToDelayed,
    [keys.job(id), keys.lock(id), keys.active, keys.stalled, keys.delayed, keys.marker, ...eventKeys(keys)],
    [id, token, timestamp],
  )) as [string, (string | number)?]
  if (reply[0] === 'ok') return { status: 'ok', due: Number(reply[1]) }
  if (reply[0] === 'not-active') return { status: 'not-active', state: reply[1] as JobState | 'missing' }
  return reply[0] === 'lost' ? { status: 'lost' } : { status: 'missing' }
}

/** What changeDelay found: rescheduled (due at `due`, ms), or the state that kept it from moving. */
export type ChangeDelayOutcome = { status: 'ok'; due: number } | { status: 'not-delayed'; state: JobState | 'waiting-children' | 'missing' }

/** Reschedules a delayed job to `delay` ms from now (Redis's clock). */
export async function changeDelay(client: RedisClient, keys: QueueKeys, id: string, delay: number): Promise<ChangeDelayOutcome> {
  const reply = (await evalScript(
    client,
    CHANGE_SCRIPTS.changeDelay,
    [keys.job(id), keys.delayed, keys.marker, ...eventKeys(keys)],
    [id, delay],
  )) as [string, string | number]
  if (reply[0] === 'ok') return { status: 'ok', due: Number(reply[1]) }
  return { status: 'not-delayed', state: reply[1] as JobState | 'waiting-children' | 'missing' }
}

/** Extends a run's lease to `ms` from now; resolves to 1 when `token` held it, else 0 (BullMQ's reply). */
export async function extendLock(client: RedisClient, keys: QueueKeys, id: string, token: string, ms: number): Promise<number> {
  return (await evalScript(client, CHANGE_SCRIPTS.extendLock, [keys.lock(id), keys.active, keys.stalled], [id, token, ms])) as number
}

/** Releases deduplication id `deduplicationId` if job `id` holds it; resolves to 1 when it did, else 0. */
export async function unhold(client: RedisClient, keys: QueueKeys, deduplicationId: string, id: string): Promise<number> {
  return (await evalScript(
    client,
    CHANGE_SCRIPTS.unhold,
    [keys.meta, keys.deduplication(deduplicationId)],
    [deduplicationId, id],
  )) as number
}
