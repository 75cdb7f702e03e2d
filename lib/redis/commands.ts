/**
 * A barrel: the script modules, re-exported so callers keep one import (`* as commands`). Each module
 * owns its scripts' KEYS and ARGV order and names its scripts; script-runner.ts is the one that runs them.
 *   adding.ts            add-7 (and addAll's MULTI)
 *   taking.ts            a run's take and its lease: take, requeue, unreserve, extend, reclaim
 *   finishing.ts         a run's finish (finish-16), which takes the next jobs in the same call
 *   flows.ts             flows: addFlow, adoptChild, settleChild, moveToWaitingChildren, a parent's reads
 *   sweeping.ts          the sweep: probe, promote, trim, the reaper's failure claim
 *   sweep-step.ts        one step of the stalled sweep (sweep-11)
 *   admin.ts             admin and clean-up: remove, rate limit, listen, pause, progress, logs, clean, drain, obliterate
 *   retrying.ts          retrying finished jobs: retry
 *   scheduling.ts        job schedulers: schedule, iterate, unschedule
 *   changing.ts          changing a job (updateData, changePriority, moveToDelayed, changeDelay, extendLock) and unhold
 *   worker-functions.ts  worker functions: invocation leases, the backlog
 * The plain commands are in queries.ts.
 */

import { ADD_SCRIPTS } from './adding.js'
import { ADMIN_SCRIPTS } from './admin.js'
import { CHANGE_SCRIPTS } from './changing.js'
import type { RedisClient } from './connection.js'
import { FINISH_SCRIPTS } from './finishing.js'
import { FLOW_SCRIPTS } from './flows.js'
import { RETRY_SCRIPTS } from './retrying.js'
import { SCHEDULE_SCRIPTS } from './scheduling.js'
import { loadScript } from './script-runner.js'
import { SWEEP_SCRIPTS } from './sweeping.js'
import { TAKE_SCRIPTS } from './taking.js'
import { WORKER_FUNCTION_SCRIPTS } from './worker-functions.js'

export * from './adding.js'
export * from './admin.js'
export * from './changing.js'
export * from './finishing.js'
export * from './flows.js'
export { iterationId } from './iteration-id.js'
export * from './retrying.js'
export * from './scheduling.js'
export type { NextDue } from './script-runner.js'
export { loadScript, setScriptWrapper } from './script-runner.js'
export * from './sweep-step.js'
export * from './sweeping.js'
export * from './taking.js'
export * from './worker-functions.js'

/** Every script file, by the command that runs it. */
export const SCRIPT_FILES = {
  ...ADD_SCRIPTS,
  ...TAKE_SCRIPTS,
  ...FINISH_SCRIPTS,
  ...FLOW_SCRIPTS,
  ...SWEEP_SCRIPTS,
  ...ADMIN_SCRIPTS,
  ...RETRY_SCRIPTS,
  ...SCHEDULE_SCRIPTS,
  ...CHANGE_SCRIPTS,
  ...WORKER_FUNCTION_SCRIPTS,
} as const

/** Loads every script into Redis's cache, so a first call is an EVALSHA (for benchmarks). */
export async function preloadScripts(client: RedisClient): Promise<void> {
  for (const file of Object.values(SCRIPT_FILES)) await client.script('LOAD', loadScript(file).lua)
}
