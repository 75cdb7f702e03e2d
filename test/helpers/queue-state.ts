/** Queue states for tests: the one builder in cli/support/crashed-state.ts, under the names the tests use. */
export { addJobs, buildCrashedState as crashedJobs, holdJobs } from '../../cli/support/crashed-state.js'

import type { RedisClient } from '../../lib/redis/connection.js'
import { queueKeys } from '../../lib/redis/keys.js'

/**
 * Marks jobs as stalled once before (stalledCounter 1): with the default maxStalledCount (1) their next
 * stall fails them, as a stall on the last attempt did when a stall used an attempt. Returns the ids.
 */
export async function stalledBefore(client: RedisClient, queue: string, ids: string[], prefix = 'emq'): Promise<string[]> {
  for (const id of ids) await client.hset(queueKeys(prefix, queue).job(id), 'stalledCounter', '1')
  return ids
}
