/**
 * Retrying finished jobs (queue.retryJobs, job.retry): retry-8.lua, and the plain reads its caller makes
 * between the rounds it asks for (lib/queue/job-actions.ts).
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import type { StoredState } from '../job.js'
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'
import { evalScript, eventKeys, pairs } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const RETRY_SCRIPTS = { retry: 'retry-8.lua' } as const

/** The set a retry takes jobs from; its name is the `prev` of their `waiting` event too. */
export type RetrySet = 'failed' | 'completed'

/** What a retry of completed jobs is told once retry-8.lua asked for it (a "need" reply). */
export interface RetryKnown {
  /** Deduplication ids of the candidates: the keys of their holds with a ttl go with the call. */
  deduplicationIds: string[]
  /** The jobs meta names as those ids' holders: their hashes go with the call (a live holder refuses the retry). */
  holders: string[]
  /** Flow children whose parents the caller found still waiting for children, or gone. */
  checkedParents: string[]
}

/** A candidate retry-8.lua asked about: its deduplication id and that id's holder in meta, or its unchecked parent. */
export interface RetryNeed {
  id: string
  deduplicationId?: string
  holder?: string
  parentKey?: string
}

export type RetryReply =
  | { status: 'ok'; moved: string[]; handoffs: [string, string][]; refused: string[] }
  | { status: 'not-in'; id: string; state: StoredState | 'missing' }
  | { status: 'held'; id: string; deduplicationId: string; holder: string }
  | { status: 'need'; needs: RetryNeed[] }

/**
 * Sends failed or completed jobs (`set`) back to `wait`, their attemptsMade kept, or reset with `fresh`.
 * `strict`: every id must be in the set and none refused, else nothing changes (`not-in`, with the first
 * other id's state; `held`). `maxScore`: only jobs that finished no later than this (their score) move.
 * Completed jobs come with what the script asked for (`known`) and may be answered `need` (nothing changed).
 * `handoffs`: the entries a flow's children left for their parents (lib/flows/handoffs.ts delivers them);
 * `refused`: ids left in the set (not strict).
 */
export async function retry(
  client: RedisClient,
  keys: QueueKeys,
  call: { set: RetrySet; ids: string[]; strict: boolean; maxScore?: number; fresh?: boolean; known?: RetryKnown },
): Promise<RetryReply> {
  const { set, ids, known } = call
  const maxScore = call.maxScore ?? Number.POSITIVE_INFINITY
  const given = known ? [...known.deduplicationIds.map((d) => keys.deduplication(d)), ...known.holders.map((h) => keys.job(h))] : []
  const reply = (await evalScript(
    client,
    RETRY_SCRIPTS.retry,
    [keys[set], keys.wait, keys.marker, ...eventKeys(keys), keys.prioritized, keys.handoffs, ...ids.map((id) => keys.job(id)), ...given],
    [
      `${call.strict ? 'strict' : 'any'}${call.fresh ? '+' : ''}`,
      Number.isFinite(maxScore) ? String(maxScore) : '+inf',
      set,
      ids.length,
      ...ids,
      ...(known?.checkedParents ?? []),
    ],
  )) as [string, ...unknown[]]
  const [status, a, b, c] = reply
  if (status === 'ok') return { status, moved: a as string[], handoffs: pairs(b as string[]), refused: c as string[] }
  if (status === 'not-in') return { status, id: a as string, state: b as StoredState | 'missing' }
  if (status === 'held') return { status, id: a as string, deduplicationId: b as string, holder: c as string }
  const needs = (a as string[][]).map(([id, deduplicationId, holder, parentKey]) => ({
    id: id as string,
    ...(deduplicationId ? { deduplicationId } : {}),
    ...(holder ? { holder } : {}),
    ...(parentKey ? { parentKey } : {}),
  }))
  return { status: 'need', needs }
}

/** The newest score of a finished set (its latest finish time, as Redis writes it), undefined when it is empty. */
export async function newestScore(client: RedisClient, keys: QueueKeys, set: RetrySet): Promise<string | undefined> {
  const [, score] = await client.zrange(keys[set], '-1', '-1', 'WITHSCORES')
  return score
}

/**
 * Up to `n` [id, score] of a finished set, oldest first, from score `min` (the first `skip` members at that
 * score passed over) up to `max`: scores as Redis writes them, so one given back as `min` is exact.
 */
export async function finishedFrom(
  client: RedisClient,
  keys: QueueKeys,
  set: RetrySet,
  from: { min: string; skip: number },
  max: string,
  n: number,
): Promise<[string, string][]> {
  const flat = await client.zrangebyscore(keys[set], from.min, max, 'WITHSCORES', 'LIMIT', from.skip, n)
  return pairs(flat)
}

/** Each job's state, by its key in any queue (a flow's parents), undefined for a job that does not exist: one HGET each, pipelined. */
export function statesOf(client: RedisClient, jobKeys: string[]): Promise<(string | undefined)[]> {
  return Promise.all(jobKeys.map(async (key) => (await client.hget(key, 'state')) ?? undefined))
}
