/**
 * Promoter: a worker's share of delayed jobs. The marker's 'd' member carries the earliest due time; an
 * idle worker that pops it promotes what is due (lua/promote-3.lua) and keeps a timer for the next due
 * time, so a delayed job (or a retry in backoff) starts within a few ms of its due time without polling.
 * The promotion's marker ('0') wakes an idle worker to take the job. A closing worker hands its timer's
 * duty back to the marker for another worker; a crashed one leaves it to the sweep, which promotes due
 * jobs and re-arms the marker.
 */
import { promote } from './commands.js'
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'
import type { Clock } from './options.js'

/** Delayed jobs read per promote call. */
const PROMOTE_BATCH = 100
/** After a failed promotion, the next try. */
const RETRY_MS = 1_000

export class Promoter {
  private timer: unknown
  /** When the timer fires (monotonic ms); Infinity when no timer is set. */
  private firesAt = Number.POSITIVE_INFINITY
  /** The due time the timer waits for (Redis's clock), to hand back on close. */
  private dueAt: number | undefined
  private closed = false

  constructor(
    private readonly client: RedisClient,
    private readonly keys: QueueKeys,
    private readonly clock: Clock,
    private readonly report: (err: unknown) => void,
  ) {}

  /** Promotes every delayed job that is due, and waits for the next one. */
  async promoteDue(): Promise<void> {
    for (;;) {
      const ids = await this.client.zrange(this.keys.delayed, '0', String(PROMOTE_BATCH - 1))
      if (ids.length === 0) return
      const { promoted, nextDueInMs, nextDueAt } = await promote(this.client, this.keys, ids, false)
      if (promoted.length < ids.length) return this.schedule(nextDueInMs, nextDueAt)
    }
  }

  /** Stops the timer; another idle worker inherits the due time it was waiting for. */
  async close(): Promise<void> {
    this.closed = true
    this.clear()
    if (this.dueAt !== undefined) await this.client.zadd(this.keys.marker, 'LT', String(this.dueAt), 'd')
  }

  private schedule(inMs: number | undefined, dueAt: number | undefined): void {
    if (inMs === undefined || this.closed) return
    const firesAt = this.clock.now() + inMs
    if (firesAt >= this.firesAt) return
    this.clear()
    this.firesAt = firesAt
    this.dueAt = dueAt
    this.timer = this.clock.setTimeout(() => void this.fire(), inMs)
  }

  private async fire(): Promise<void> {
    this.timer = undefined
    this.firesAt = Number.POSITIVE_INFINITY
    this.dueAt = undefined
    try {
      await this.promoteDue()
    } catch (err) {
      this.report(err)
      this.schedule(RETRY_MS, undefined)
    }
  }

  private clear(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer)
    this.timer = undefined
    this.firesAt = Number.POSITIVE_INFINITY
  }
}
