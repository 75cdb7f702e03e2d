/** Queue states for tests: jobs taken by a worker that then died (see cli/crashed-state.ts). */
import type { Redis } from 'ioredis'
import { buildCrashedState } from '../../cli/crashed-state.js'

/** Adds `n` jobs (ids j0..jn-1) and takes them all with a lease of `leaseMs` that nobody renews. */
export function crashedJobs(client: Redis, queue: string, n: number, options: { leaseMs?: number; attempts?: number; prefix?: string } = {}): Promise<string[]> {
  return buildCrashedState(client, queue, n, options)
}
