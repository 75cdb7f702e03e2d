/**
 * Promoter: a worker's share of delayed jobs. It keeps one timer for the earliest due time it knows of
 * and, when it fires, promotes what is due (lua/promote-7.lua), so a delayed job (or a retry in backoff)
 * joins `wait` within a few ms of its due time without polling, however long `wait` is. It learns the
 * due time from the calls the worker makes anyway: an idle worker pops the marker's 'd' member, a busy
 * one reads it from each take and finish reply (lua/includes/nextDue.lua). The promotion's marker ('0')
 * wakes an idle worker to take the job. A closing worker hands its timer's duty back to the marker for
 * another worker; a crashed one leaves it to the other workers and the sweep, which promotes due jobs
 * and re-arms the marker. A timer of any length is exact (a job delayed a year; see clock.ts).
 *
 * It also keeps the worker's share of job schedules: when the worker starts a scheduler's run, the next
 * run is made at once, in `delayed` (schedulers/iterations.ts startedRun, as BullMQ makes it), and the
 * timer learns its due time. A call that fails is reported and tried again after RETRY_MS until it
 * succeeds or the worker closes, so a fleet with no sweep does not lose its schedule to one error.
 */
import type { Clock } from '../clock.js'
import type { NextDue } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { handBackDue, oldestIds } from '../redis/queries.js'
import { parseIteration, promoteDue, startedRun } from '../schedulers/iterations.js'

/** Delayed jobs read per promote call. */
const PROMOTE_BATCH = 100
/** After a failed promotion, the next try; due times learnt meanwhile wait for it. */
const RETRY_MS = 1_000
/** A due time learnt again within this of the timer's (the Redis and local clocks tick apart) keeps the timer. */
const SAME_DUE_MS = 5

export class Promoter {
  private timer: unknown
  /** When the timer fires (monotonic ms); Infinity when no timer is set. */
  private firesAt = Number.POSITIVE_INFINITY
  /** The due time the timer waits for (Redis's clock), to hand back on close. */
  private dueAt: number | undefined
  /** A promotion is running: its reply sets the next timer. */
  private promoting = false
  /** After a failure, no promotion before this (monotonic ms). */
  private retryAt = Number.NEGATIVE_INFINITY
  private closed = false
  /** Schedulers whose next run is being made for a run started here, and whether to make it once more after. */
  private readonly advancing = new Map<string, { again: boolean; done: Promise<void> }>()
  /** Wakes the retries waiting out RETRY_MS, so close() need not wait for them. */
  private readonly pauses = new Set<() => void>()

  constructor(
    private readonly client: RedisClient,
    private readonly keys: QueueKeys,
    private readonly clock: Clock,
    private readonly report: (err: unknown) => void,
  ) {}

  /** Promotes every delayed job that is due, and waits for the next one. */
  async promoteDue(): Promise<void> {
    this.promoting = true
    try {
      for (;;) {
        const ids = await oldestIds(this.client, this.keys.delayed, PROMOTE_BATCH)
        if (ids.length === 0) return
        const step = await promoteDue(this.client, this.keys, ids, false)
        if (step.promoted < ids.length) return this.schedule(step)
      }
    } finally {
      this.promoting = false
    }
  }

  /** A take or finish reply said when the earliest delayed job is due. */
  learn(due: NextDue): void {
    if (this.promoting || this.clock.now() < this.retryAt) return
    this.schedule(due)
  }

  /**
   * The worker started job `id`: when it is a scheduler's run, the schedule's next run is made now. Resolves
   * once made; errors are reported and retried, never thrown.
   */
  started(id: string): Promise<void> {
    const sid = parseIteration(id)?.schedulerId
    if (sid === undefined || this.closed) return Promise.resolve()
    const current = this.advancing.get(sid)
    if (current) {
      current.again = true
      return current.done
    }
    const entry = { again: false, done: Promise.resolve() }
    this.advancing.set(sid, entry)
    entry.done = this.advance(id, entry).finally(() => this.advancing.delete(sid))
    return entry.done
  }

  /** Stops the timer; another idle worker inherits the due time it was waiting for. */
  async close(): Promise<void> {
    this.closed = true
    this.clear()
    for (const wake of [...this.pauses]) wake()
    await Promise.all([...this.advancing.values()].map((a) => a.done))
    if (this.dueAt !== undefined) await handBackDue(this.client, this.keys, this.dueAt)
  }

  private async advance(id: string, entry: { again: boolean }): Promise<void> {
    for (;;) {
      entry.again = false
      try {
        const next = await startedRun(this.client, this.keys, id)
        if (next) this.learn({ nextDueInMs: next.inMs, nextDueAt: next.at })
      } catch (err) {
        this.report(err)
        entry.again = true
        await this.pause(RETRY_MS)
      }
      if (!entry.again || this.closed) return
    }
  }

  /** Waits `ms`, or until close(). */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        this.clock.clearTimeout(handle)
        this.pauses.delete(wake)
        resolve()
      }
      const handle = this.clock.setTimeout(wake, ms)
      this.pauses.add(wake)
    })
  }

  private schedule({ nextDueInMs, nextDueAt }: NextDue): void {
    if (nextDueInMs === undefined || this.closed) return
    const firesAt = this.clock.now() + nextDueInMs
    if (firesAt >= this.firesAt - SAME_DUE_MS) return
    this.arm(nextDueInMs, nextDueAt)
  }

  private arm(inMs: number, dueAt: number | undefined): void {
    this.clear()
    this.firesAt = this.clock.now() + inMs
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
      this.retryAt = this.clock.now() + RETRY_MS
      if (!this.closed) this.arm(RETRY_MS, undefined)
    }
  }

  private clear(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer)
    this.timer = undefined
    this.firesAt = Number.POSITIVE_INFINITY
  }
}
