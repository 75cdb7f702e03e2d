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
import type { Clock } from './options.js'

export const LEASE_BATCH_SIZE_DEFAULT = 500

export interface Lease {
  id: string
  token: string
}

/** Codes per lease, in order: 1 renewed, 2 lapsed lease taken back, 0 lost. */
export type ExtendLeases = (leases: Lease[]) => Promise<number[]>

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
}

export class LockManager {
  private readonly held = new Map<string, Held>()
  private timer: unknown
  private running: Promise<void> | undefined
  private closed = false

  constructor(private readonly options: LockManagerOptions) {}

  /** `since`: when the request that set the lease was sent (its deadline is counted from then). */
  add(lease: Lease, since: number): void {
    this.held.set(lease.id, { ...lease, deadline: since + this.options.leaseMs })
  }

  remove(id: string): void {
    this.held.delete(id)
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
    const leases = [...this.held.values()]
    if (leases.length === 0) return
    const { clock, leaseMs, batchSize = LEASE_BATCH_SIZE_DEFAULT } = this.options
    const sentAt = clock.now()
    const batches: Held[][] = []
    for (let i = 0; i < leases.length; i += batchSize) batches.push(leases.slice(i, i + batchSize))
    const replies = await Promise.allSettled(batches.map((batch) => this.options.extend(batch.map(({ id, token }) => ({ id, token })))))
    replies.forEach((reply, b) => {
      const batch = batches[b] ?? []
      if (reply.status === 'rejected') {
        this.options.onError(reply.reason)
        return
      }
      batch.forEach((lease, i) => {
        if (this.held.get(lease.id) !== lease) return // finished or replaced meanwhile
        if (reply.value[i] === 0) {
          this.held.delete(lease.id)
          this.options.onLost(lease.id, 'the job was recovered by a sweep or is held by another worker')
        } else lease.deadline = sentAt + leaseMs
      })
    })
    const now = clock.now()
    for (const lease of this.held.values()) {
      if (lease.deadline <= now) {
        this.held.delete(lease.id)
        this.options.onLost(lease.id, 'the lease could not be renewed before it expired')
      }
    }
  }

  /** Stops the timer and waits for a tick in progress. Safe to call more than once. */
  async close(): Promise<void> {
    this.closed = true
    if (this.timer !== undefined) this.options.clock.clearTimeout(this.timer)
    this.timer = undefined
    await this.running
  }

  private arm(): void {
    this.timer = this.options.clock.setTimeout(() => {
      this.running = this.tick()
        .catch((err: unknown) => this.options.onError(err))
        .finally(() => {
          this.running = undefined
          if (!this.closed) this.arm()
        })
    }, this.options.intervalMs)
  }
}
