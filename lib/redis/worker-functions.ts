/**
 * Worker functions (echomq/lambda): an invocation's lease, and the backlog that scales them.
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import { EchoMQError } from '../errors.js'
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'
import { evalScript } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const WORKER_FUNCTION_SCRIPTS = {
  invocation: 'invocation-1.lua',
  backlog: 'backlog-5.lua',
} as const

/**
 * Worker-function invocations enter (or renew) their lease, or leave: one id (a function's own mark) or the
 * ids the reaper starts in one pass, in one call; resolves to the live count.
 */
export async function invocation(
  client: RedisClient,
  keys: QueueKeys,
  op: 'enter' | 'leave',
  ids: string | readonly string[],
  leaseMs: number,
): Promise<number> {
  const list = typeof ids === 'string' ? [ids] : ids
  if (list.length === 0) throw new EchoMQError('ERR_SCRIPT', `invocation ${op}: no invocation id`)
  return (await evalScript(client, WORKER_FUNCTION_SCRIPTS.invocation, [keys.invocations], [op, leaseMs, ...list])) as number
}

/**
 * Jobs ready to run (waiting, prioritized, delayed and due; none while paused) and live worker-function
 * invocations, for a queue the reaper did not probe in its pass (the probe reads the same: probe-13.lua).
 */
export async function backlog(client: RedisClient, keys: QueueKeys): Promise<{ ready: number; live: number }> {
  const [ready, live] = (await evalScript(
    client,
    WORKER_FUNCTION_SCRIPTS.backlog,
    [keys.wait, keys.prioritized, keys.delayed, keys.meta, keys.invocations],
    [],
  )) as [number, number]
  return { ready, live }
}
