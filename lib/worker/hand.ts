/**
 * Hand: the jobs a busy worker has taken and leased but not started, because every slot runs a processor.
 * While jobs are short a worker keeps one in hand: it starts the moment a processor returns, before that
 * run's finish call goes out, so the worker and Redis work side by side (one round trip per job is kept,
 * and no longer waited for). A job held for IDLE_MS without a free slot (the jobs slowed down) goes back
 * to the front of `wait` unstarted, so it never waits behind a long job; so do those held at close.
 */
import type { Clock } from '../clock.js'

/** A job held this long without a slot going free goes back (as reserved ids do, take-ahead.ts). */
export const HAND_IDLE_MS = 100

export interface HandOptions<T> {
  clock: Clock
  /** The held job's id. */
  idOf(job: T): string
  /** Gives a job back to `wait`, unstarted (its lease dropped). */
  giveBack(job: T): void
}

export class Hand<T> {
  private readonly held: { job: T; at: number }[] = []
  private timer: unknown

  constructor(private readonly o: HandOptions<T>) {}

  get size(): number {
    return this.held.length
  }

  has(id: string): boolean {
    return this.held.some((h) => this.o.idOf(h.job) === id)
  }

  hold(job: T): void {
    this.held.push({ job, at: this.o.clock.now() })
    this.watch()
  }

  /** The job held longest, to start now. */
  next(): T | undefined {
    return this.held.shift()?.job
  }

  /** Forgets a held job (its lease was lost); true when it was held. */
  drop(id: string): boolean {
    const i = this.held.findIndex((h) => this.o.idOf(h.job) === id)
    if (i >= 0) this.held.splice(i, 1)
    return i >= 0
  }

  /** Gives every held job back (the worker closes). */
  giveBackAll(): void {
    if (this.timer !== undefined) this.o.clock.clearTimeout(this.timer)
    this.timer = undefined
    for (const h of this.held.splice(0)) this.o.giveBack(h.job)
  }

  private watch(): void {
    if (this.timer !== undefined || this.held.length === 0) return
    const wait = Math.max(0, (this.held[0]?.at ?? 0) + HAND_IDLE_MS - this.o.clock.now())
    this.timer = this.o.clock.setTimeout(() => {
      this.timer = undefined
      const now = this.o.clock.now()
      while (this.held.length > 0 && now - (this.held[0]?.at ?? now) >= HAND_IDLE_MS) this.o.giveBack(this.held.shift()?.job as T)
      this.watch()
    }, wait)
  }
}
