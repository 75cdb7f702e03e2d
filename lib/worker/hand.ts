/**
 * Hand: the jobs a busy worker has read but not started, because every slot runs a processor. While jobs
 * are short a worker keeps one in hand (at concurrency 1 with jobs shorter than a round trip, read only by
 * the calls that take a job: TakeAhead.handSize): a finish reads it (its fields, and the token it will run under)
 * from the ids the worker reserved, so it starts the moment a processor returns, without waiting for
 * Redis. A job in hand is only reserved: neither leased nor `active`, no attempt started. It is taken (its
 * lease, `active`, its start) by the call that follows its start, which leaves before its processor runs:
 * so a worker that dies with a job in hand leaves a reservation, which the sweep returns with no attempt
 * used. A job held HAND_IDLE_MS without a free slot (the jobs slowed down) goes back to the front of
 * `wait`, so it never waits behind a long job; so do those held at pause and close, and one whose
 * reservation is half spent (`maxAgeMs` after it was made): the token it was read with holds only while
 * no one else can take it, so it never starts near its reservation's end (a worker resumed from a long
 * pause gives it back rather than start it).
 *
 * The worker calls `hold` with what a finish read, `start` when a slot is free (the job moves to the
 * starts the next call confirms), `starts()` as it sends that call, and `giveBackAll` at pause and close.
 */
import type { Clock } from '../clock.js'

/** A job held this long without a slot going free goes back (as reserved ids do, take-ahead.ts). */
export const HAND_IDLE_MS = 100

export interface HandOptions<T> {
  clock: Clock
  /** How old (ms since it was reserved) a held job may be when it starts: half its reservation. */
  maxAgeMs: number
  /** The held job's id. */
  idOf(job: T): string
  /** Gives jobs back to `wait`, unstarted (they are reservations: lib/redis/commands.ts unreserve). */
  giveBack(jobs: T[]): void
}

export class Hand<T> {
  private readonly held: { job: T; at: number; reservedAt: number }[] = []
  /** Started since the last call went out: the next call takes them. */
  private started: T[] = []
  private timer: unknown

  constructor(private readonly o: HandOptions<T>) {}

  /** Jobs held, not started. */
  get size(): number {
    return this.held.length
  }

  has(id: string): boolean {
    return this.held.some((h) => this.o.idOf(h.job) === id)
  }

  /** Holds a job read from a reservation made at `reservedAt` (the clock's ms). */
  hold(job: T, reservedAt: number): void {
    this.held.push({ job, at: this.o.clock.now(), reservedAt })
    this.watch()
  }

  /** The job held longest, to start now: the next call (`starts()`) takes it. */
  start(): T | undefined {
    this.giveBackStale()
    const job = this.held.shift()?.job
    if (job !== undefined) this.started.push(job)
    return job
  }

  /** The jobs started since the last call, for the call going out now. */
  starts(): T[] {
    const started = this.started
    this.started = []
    return started
  }

  /** Gives every held job back (the worker pauses or closes). */
  giveBackAll(): void {
    if (this.timer !== undefined) this.o.clock.clearTimeout(this.timer)
    this.timer = undefined
    const all = this.held.splice(0).map((h) => h.job)
    if (all.length > 0) this.o.giveBack(all)
  }

  /** When the job held longest must go back (ms, the clock's). */
  private dueAt(h: { at: number; reservedAt: number }): number {
    return Math.min(h.at + HAND_IDLE_MS, h.reservedAt + this.o.maxAgeMs)
  }

  /** Gives back the held jobs past their time (held jobs are in the order read, so the oldest lead). */
  private giveBackStale(): void {
    const now = this.o.clock.now()
    const stale: T[] = []
    while (this.held.length > 0 && this.dueAt(this.held[0] as { at: number; reservedAt: number }) <= now)
      stale.push(this.held.shift()?.job as T)
    if (stale.length > 0) this.o.giveBack(stale)
  }

  private watch(): void {
    const first = this.held[0]
    if (this.timer !== undefined || first === undefined) return
    this.timer = this.o.clock.setTimeout(
      () => {
        this.timer = undefined
        this.giveBackStale()
        this.watch()
      },
      Math.max(0, this.dueAt(first) - this.o.clock.now()),
    )
  }
}
