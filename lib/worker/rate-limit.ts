/**
 * BullMQ's worker.rateLimit(ms): holds every worker of the queue back from starting jobs for `ms` (meta's
 * `limitedUntil`), this one from its next call's answer; paired with `throw Worker.RateLimitError()`, which returns
 * the job to the line without using an attempt (worker/failure.ts).
 */
import { EchoMQError } from '../errors.js'
import { rateLimit as rateLimitCall } from '../redis/commands.js'
import type { RunContext } from './context.js'

export async function rateLimit(core: RunContext, ms: number): Promise<void> {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0)
    throw new EchoMQError('ERR_OPTIONS', `expected rateLimit's ms to be an integer >= 0, got: ${String(ms)}`)
  try {
    await rateLimitCall(core.conn.client, core.keys, ms)
  } catch (err) {
    throw core.failure('rate-limit queue', err)
  }
  // No hold of its own: the worker's next take or finish is answered with the hold (as every worker's), and a
  // hold lifted meanwhile (queue.removeRateLimitKey, rateLimit(0)) is not waited out.
}
