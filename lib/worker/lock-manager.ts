/**
 * LockManager: one timer per worker renews every lease the worker holds. Each tick sends the leases in
 * batches of at most `batchSize` (a few thousand script arguments), all written at once, so a tick costs
 * one round trip however many jobs are in flight. The timer is re-armed after each tick completes, so
 * ticks never overlap. It needs only "extend these leases", not the worker.
 *
 * A lease reported lost (recovered, or held by another token) is dropped and reported through `onLost`.
 * A lease that could not be renewed (Redis unreachable) is reported lost once its last known deadline,
 * counted from when the renewal that set it was sent, has passed: the job is aborted before a sweep can
 * recover it elsewhere.
 */

import type { Clock } from '../clock.js'
import type { Lease, LeaseStatus, Renewal } from '../redis/commands.js'

const LEASE_BATCH_SIZE_DEFAULT = 500

export type { Lease }

/** One status per lease, in order (lib/commands.ts's extend). */
type ExtendLeases = (leases: Renewal[]) => Promise<LeaseStatus[]>

export interface LockManagerOptions {
  extend: ExtendLeases
  intervalMs: number
  leaseMs: number
  clock: Clock
  onLost(id: string, reason: string): void
  onError(err: unknown): void
  batchSize?: number
}

interface Held extends Lease {
  deadline: number
  /**
   * Renewals that also refresh the lease index alternate with renewals that do not: a renewal every
   * half lease keeps the recorded deadline (set by the last refresh) at most one lease old, and a sweep
   * re-scores a live lease it meets with a stale one. Leases alternate in phase, so each tick refreshes
   * about half of them.
   */
  renewals: number
  phase: 0 | 1
}

export class LockManager {
  private readonly held = new Map<string, Held>()
  private added = 0
  private timer: unknown
  private running: Promise<void> | undefined
  private closed = false
  /** The last tick's renewals failed or went unanswered. */
  private failing = false

  constructor(private readonly options: LockManagerOptions) {}

  /** `since`: when the request that set the lease was sent (its deadline is counted from then). */
  add(lease: Lease, since: number): void {
    const phase = (this.added++ % 2) as 0 | 1
    this.held.set(lease.id, { id: lease.id, token: lease.token, deadline: since + this.options.leaseMs, renewals: 0, phase })
  }

  remove(id: string): void {
    this.held.delete(id)
  }

  /** Until when the lease of job `id` is known to last (this clock), or undefined when none is held (lapsed or dropped). */
  deadlineOf(id: string): number | undefined {
    return this.held.get(id)?.deadline
  }

  get size(): number {
    return this.held.size
  }

  start(): void {
    if (this.closed || this.timer !== undefined) return
    this.arm()
  }

  /** One renewal round; the timer calls it, tests may too. */
  async tick(): Promise<void> {
    // While renewals fail, a lease past its deadline is lost now: asking Redis again cannot save it in
    // time. (A worker that was only paused has no failures, so it asks first and may take its leases back.)
    if (this.failing) this.expire('the lease could not be renewed before it expired')
    const leases = [...this.held.values()]
    if (leases.length === 0) return
    const { clock, leaseMs, batchSize = LEASE_BATCH_SIZE_DEFAULT } = this.options
    const sentAt = clock.now()
    const batches: Held[][] = []
    for (let i = 0; i < leases.length; i += batchSize) batches.push(leases.slice(i, i + batchSize))
    const renewed = Promise.allSettled(
      batches.map((batch) =>
        this.options.extend(batch.map(({ id, token, renewals, phase }) => ({ id, token, index: (renewals + phase) % 2 === 1 }))),
      ),
    )
    // No answer (a stalled link) must not hold back the expiry check below: wait for one only until the
    // earliest deadline (at least one interval, so a worker resuming from a pause hears its take-backs).
    let timer: unknown
    const { intervalMs } = this.options
    const unanswered = new Promise<undefined>((resolve) => {
      const wait = (ms: number, lateOnce: boolean) => {
        const due = clock.now() + ms
        timer = clock.setTimeout(() => {
          // Fired well after its time: this process was paused (SIGSTOP, a long GC) and the reply may be
          // waiting to be read. Give it one more interval before concluding that Redis did not answer.
          if (!lateOnce && clock.now() - due > intervalMs / 2) wait(intervalMs, true)
          else resolve(undefined)
        }, ms)
      }
      wait(Math.max(this.earliestDeadline() - sentAt, intervalMs), false)
    })
    const replies = await Promise.race([renewed, unanswered])
    clock.clearTimeout(timer)
    this.failing = replies === undefined
    replies?.forEach((reply, b) => {
      const batch = batches[b] ?? []
      if (reply.status === 'rejected') {
        this.failing = true
        this.options.onError(reply.reason)
        return
      }
      batch.forEach((lease, i) => {
        if (this.held.get(lease.id) !== lease) return // finished or replaced meanwhile
        if (reply.value[i] === 'lost') {
          this.held.delete(lease.id)
          this.options.onLost(lease.id, 'the job was recovered by a sweep or is held by another worker')
        } else {
          // A reply read after the deadline it sets (this process was paused while it was in flight) says
          // the lease was renewed, but not until when: ask again on the next tick rather than give it up.
          const now = clock.now()
          lease.deadline = sentAt + leaseMs > now ? sentAt + leaseMs : now + intervalMs
          // A lease taken back was re-indexed; either way the alternation goes on from here.
          lease.renewals = reply.value[i] === 'reclaimed' ? lease.phase : lease.renewals + 1
        }
      })
    })
    this.expire('the lease could not be renewed before it expired')
  }

  /** Stops the timer and waits for a tick in progress. Safe to call more than once. */
  async close(): Promise<void> {
    this.closed = true
    if (this.timer !== undefined) this.options.clock.clearTimeout(this.timer)
    this.timer = undefined
    await this.running
  }

  private expire(reason: string): void {
    const now = this.options.clock.now()
    for (const lease of this.held.values()) {
      if (lease.deadline <= now) {
        this.held.delete(lease.id)
        this.options.onLost(lease.id, reason)
      }
    }
  }

  private earliestDeadline(): number {
    let earliest = Infinity
    for (const lease of this.held.values()) earliest = Math.min(earliest, lease.deadline)
    return earliest
  }

  private arm(): void {
    const { clock, intervalMs } = this.options
    // While renewals fail, tick again no later than the earliest deadline, so its job is aborted on time.
    const delay = this.failing ? Math.max(1, Math.min(intervalMs, this.earliestDeadline() - clock.now())) : intervalMs
    this.timer = clock.setTimeout(() => {
      this.running = this.tick()
        .catch((err: unknown) => this.options.onError(err))
        .finally(() => {
          this.running = undefined
          if (!this.closed) this.arm()
        })
    }, delay)
  }
}
