/**
 * TakeAhead: how a busy worker takes its next jobs without a read of its own. Each finish call takes the
 * next job in the same round trip; its candidates come from one of two places:
 *
 * - Reservations, while jobs are short (their run time averages under HOT_RUN_MS): each finish also pops
 *   the next ids from `wait` into `reserved` for this worker (lua/includes/takeJobs.lua reserveNext),
 *   keeping about `concurrency` of them ahead. No two workers ever get the same id, however many peek at
 *   the same queue, and a reserved job waits about one job's run time before it is taken. Reserved ids
 *   a worker will not take (it closes; its jobs slowed down) go back to the front of `wait` (unreserve);
 *   a dead worker's come back with the next sweep once they expire.
 * - A peek, otherwise: a finish reads the ids at the tail of `wait` (without taking them) about once every
 *   `concurrency` calls; later calls take them if they are still there. An id handed to a call in flight
 *   is claimed until the jobs it took are running, so no two calls of one worker try the same id.
 */

/** Jobs whose run time averages under this (ms) make a worker reserve its next candidates. */
export const HOT_RUN_MS = 10
/** Reserved ids unused this long (no finish took one) go back to `wait`: the jobs slowed down. */
export const RESERVATION_IDLE_MS = 100

export interface Candidates {
  ids: string[]
  /** Reserved by this worker (else peeked or read from `wait`). */
  reserved: boolean
}

export class TakeAhead {
  /** Ids reserved for this worker, the next to be served first. */
  private readonly pool: string[] = []
  /** Reservations asked for whose reply is not back yet. */
  private reserving = 0
  /** Ids the last peek saw at the tail of `wait`, the next to be served first. */
  private hint: string[] = []
  private readonly claimed = new Set<string>()
  private peekPending = false
  /** A peeked candidate was gone when its call ran (other workers take from the same tail). */
  private contended = false
  /** The average run time of this worker's jobs (ms), smoothed. */
  private runMs = Number.POSITIVE_INFINITY

  /** `running(id)`: the worker runs this job already (a reply read late must not hand it out again). */
  constructor(
    private readonly concurrency: number,
    private readonly running: (id: string) => boolean,
  ) {}

  /** A job ran for `ms`: what decides whether the worker reserves. */
  ran(ms: number): void {
    this.runMs = this.runMs === Number.POSITIVE_INFINITY ? ms : this.runMs * 0.9 + ms * 0.1
  }

  /** Jobs are short enough to reserve the next ones. */
  get hot(): boolean {
    return this.runMs < HOT_RUN_MS
  }

  /** Up to `n` candidates for a call: reserved ids first, else peeked ones; [] when there are none. */
  next(n: number): Candidates {
    if (this.pool.length > 0) return { ids: this.pool.splice(0, n), reserved: true }
    const ids: string[] = []
    while (ids.length < n && this.hint.length > 0) {
      const id = this.hint.shift() as string
      if (this.claimed.has(id) || this.running(id)) continue
      ids.push(id)
    }
    this.claim(ids)
    return { ids, reserved: false }
  }

  /** Ids read some other way (LRANGE) for a call: claimed until `done`. */
  claim(ids: string[]): void {
    for (const id of ids) this.claimed.add(id)
  }

  /**
   * The call that had these candidates returned (or failed: then `left` is every candidate), and the jobs
   * it took are running. Reserved candidates it left are still reserved: they are next again.
   */
  done({ ids, reserved }: Candidates, left: string[], taken: number): void {
    if (reserved) this.pool.unshift(...left)
    else {
      for (const id of ids) this.claimed.delete(id)
      if (taken + left.length < ids.length) this.contended = true
    }
  }

  /** What a finish sets aside for the calls after it: ids to reserve, or ids to peek at. */
  plan(maxPeek: number): { reserve: number; peek: number } {
    if (this.hot) {
      const room = this.concurrency + 1 - this.pool.length - this.reserving
      const reserve = Math.max(0, Math.min(2, room))
      this.reserving += reserve
      return { reserve, peek: 0 }
    }
    // A peek every ~concurrency calls: while the hint holds enough ids for the calls that may be sent
    // before a peek asked now comes back, or while one is pending, none.
    if (!this.contended && (this.peekPending || this.hint.length >= this.concurrency + 2)) return { reserve: 0, peek: 0 }
    this.peekPending = true
    return { reserve: 0, peek: Math.min(3 * this.concurrency + 8, maxPeek) }
  }

  /** The reply of a finish that asked for `plan` (or its failure: nothing received). */
  received(plan: { reserve: number; peek: number }, reserved: string[], peeked: string[]): void {
    this.reserving -= plan.reserve
    this.pool.push(...reserved)
    if (plan.peek > 0) {
      this.peekPending = false
      this.contended = false
      this.hint = peeked.filter((id) => !this.claimed.has(id) && !this.running(id))
    }
  }

  /** The reserved ids, taken out of the pool: the worker returns them to `wait`. */
  drain(): string[] {
    return this.pool.splice(0)
  }

  get reservedCount(): number {
    return this.pool.length
  }
}
