/**
 * A job scheduler's iteration id, `repeat:<scheduler id>:<due ms>` (lua/includes/iteration.lua builds the
 * same): deterministic per scheduler and due time, so no two producers make one twice. Built and read here
 * only.
 */

const PREFIX = 'repeat:'
/** The shape of an iteration id as job.opts reads it (a scheduler id holds no ':'). */
const ITERATION = /^repeat:[^:]+:\d+$/

/** The id of scheduler `schedulerId`'s run due at `due` (ms). */
export const iterationId = (schedulerId: string, due: number): string => `${PREFIX}${schedulerId}:${due}`

/** A scheduler's iteration id: its parts, or undefined for a plain job. */
export function parseIteration(id: string): { schedulerId: string; due: number } | undefined {
  if (!id.startsWith(PREFIX)) return undefined
  const at = id.lastIndexOf(':')
  const due = Number(id.slice(at + 1))
  return at > PREFIX.length && Number.isSafeInteger(due) ? { schedulerId: id.slice(PREFIX.length, at), due } : undefined
}

/** Whether `id` has the form of an iteration id (job.opts gives no `jobId` for one). */
export const isIterationId = (id: string): boolean => ITERATION.test(id)

/** Whether any of `ids` may be an iteration id (cheaply, before a parse). */
export const anyIteration = (ids: string[]): boolean => ids.some((id) => id.startsWith(PREFIX))
