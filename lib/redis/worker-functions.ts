/**
 * Worker functions (echomq/lambda): an invocation's lease, and the backlog that scales them.
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'
import { evalScript } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const WORKER_FUNCTION_SCRIPTS = {
  invocation: 'invocation-1.lua',
  backlog: 'backlog-5.lua',
} as const

/** A worker-function invocation enters (or renews) its lease, or leaves; resolves to the live count. */
export async function invocation(
  client: RedisClient,
  keys: QueueKeys,
  op: 'enter' | 'leave',
  id: string,
  leaseMs: number,
): Promise<number> {
  return (await evalScript(client, WORKER_FUNCTION_SCRIPTS.invocation, [keys.invocations], [op, id, leaseMs])) as number
}

/** Jobs ready to run (waiting, prioritized, delayed and due; none while paused) and live worker-function invocations. */
export async function backlog(client: RedisClient, keys: QueueKeys): Promise<{ ready: number; live: number }> {
  const [ready, live] = (await evalScript(
    client,
    WORKER_FUNCTION_SCRIPTS.backlog,
    [keys.wait, keys.prioritized, keys.delayed, keys.meta, keys.invocations],
    [],
  )) as [number, number]
  return { ready, live }
}
