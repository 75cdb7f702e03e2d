/**
 * JobsFailed with each failed job published once, whatever the invocations do: overlap (a duplicated
 * EventBridge delivery, a manual invoke, `echomq sweep` beside the function), fail to publish, or die.
 *
 * Every job that enters `failed` adds 1 to its queue's count (meta `failedNew`, lua/includes/useAttempt.lua).
 * After its sweeps, an invocation that publishes metrics claims the count of each queue where its last
 * sweep saw some (lua/claim-1.lua; an idle queue costs no call): the count moves into a claim that names
 * the invocation, so an overlapping one finds nothing left to claim. Then the metrics go out with what it
 * claimed, and it settles its claims (lua/settle-1.lua): published, a claim ends; not published, its jobs
 * go back to the count for the next invocation. While another invocation's claim is live, nothing is
 * claimed: the jobs wait for the next invocation.
 *
 * A claim's lease outlives its claimer, so a live invocation never loses its claim: a Lambda's claim lasts
 * the invocation's remaining time plus FAILED_CLAIM_MARGIN_MS (after that Lambda has ended it); a run with
 * no deadline (`echomq sweep`) holds it FAILED_CLAIM_LEASE_MS. An invocation that dies holding a claim
 * (killed, timed out, its connection lost) leaves it to expire; the next invocation after that takes it
 * over and publishes its jobs. One case counts twice, never loses: an invocation that dies in the instant
 * between CloudWatch accepting its publish and the one Redis call that settles the claim.
 *
 * Only an invocation that publishes claims: with metrics off nothing is claimed, and the count waits for
 * the reaper that publishes it. Failures to claim or settle are logged (warn) and never fail the run.
 */
import { randomUUID } from 'node:crypto'
import { claimFailures, settleFailures } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { queueKeys } from '../redis/keys.js'
import type { Log } from './log.js'
import type { QueueRun } from './run.js'

/** How long a claim of a run without a deadline (`echomq sweep`) lasts (ms). */
const FAILED_CLAIM_LEASE_MS = 60_000
/** Beyond a Lambda's remaining time, how long its claim lasts (ms). */
const FAILED_CLAIM_MARGIN_MS = 1_000

/** A claim's lease (ms): past the time its claimer can live. `remainingMs`: a Lambda's time left. */
function failedClaimLeaseMs(remainingMs: (() => number) | undefined): number {
  return remainingMs ? Math.max(0, Math.ceil(remainingMs())) + FAILED_CLAIM_MARGIN_MS : FAILED_CLAIM_LEASE_MS
}

/** One invocation's claims on the queues' counts of failed jobs: claim, publish (the caller), settle. */
export class FailureClaims {
  /** Names this invocation's claims in Redis. */
  private readonly token = randomUUID()
  private readonly held: string[] = []

  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    private readonly log: Log,
  ) {}

  /** Claims each queue's failed jobs its sweeps saw; `run.failedNew` becomes what this invocation holds. */
  async claim(runs: Record<string, QueueRun>, remainingMs: (() => number) | undefined): Promise<void> {
    for (const [queue, run] of Object.entries(runs)) {
      if (!run.failedPending) continue
      try {
        const { claimed, takenOver } = await claimFailures(this.client, this.keys(queue), this.token, failedClaimLeaseMs(remainingMs))
        run.failedNew = claimed
        if (claimed > 0) this.held.push(queue)
        if (takenOver > 0) {
          this.log('warn', 'took over failed jobs claimed by an invocation that never settled them (it died or timed out)', {
            queue,
            takenOver,
          })
        }
      } catch (err) {
        this.log('warn', 'could not claim the failed jobs: they wait for the next invocation', { queue, error: (err as Error).message })
      }
    }
  }

  /** Ends the claims: `published`, they go; otherwise their jobs go back to the count. */
  async settle(runs: Record<string, QueueRun>, published: boolean): Promise<void> {
    for (const queue of this.held) {
      const failedNew = runs[queue]?.failedNew ?? 0
      try {
        const held = await settleFailures(this.client, this.keys(queue), this.token, published)
        if (held === undefined && published) {
          this.log('warn', 'failed jobs published after their claim expired and was taken over: they are published twice', {
            queue,
            failedNew,
          })
        }
      } catch (err) {
        this.log(
          'warn',
          published
            ? 'failed jobs published, their claim not settled: the invocation that takes it over publishes them again'
            : 'failed jobs not published, their claim not given back: an invocation takes it over once it expires',
          { queue, failedNew, error: (err as Error).message },
        )
      }
    }
    this.held.length = 0
  }

  private keys(queue: string) {
    return queueKeys(this.prefix, queue)
  }
}
