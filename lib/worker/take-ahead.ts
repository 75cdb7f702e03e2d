/**
 * TakeAhead: how a busy worker takes its next jobs without a read of its own. Each finish call takes the
 * next job in the same round trip; its candidates come from one of two places:
 *
 * - Reservations, while jobs are short (their run time averages under HOT_RUN_MS): each finish also pops
 *   the next ids from `wait` into `reserved` for this worker (lua/includes/takeJobs.lua reserveNext),
 *   keeping about `concurrency` of them ahead. No two workers ever get the same id, however many peek at
 *   the same queue, and a reserved job waits about one job's run time before it is taken. Reserved ids
 *   the worker will not take go back to the front of `wait`: when it closes, and when no finish has used
 *   them for RESERVATION_IDLE_MS (its jobs slowed down; a timer of this module's watches that). A dead
 *   worker's come back with the next sweep once they expire.
 * - A peek, otherwise: a finish reads the ids at the tail of `wait` (without taking them) about once every
 *   `concurrency` calls; later calls take them if they are still there. An id handed to a call in flight
 *   is claimed until the jobs it took are running, so no two calls of one worker try the same id.
 *
 * The worker makes two calls per take or finish: `forTake(n)` / `forFinish()` before the call, `settle`
 * with what the reply said (or nothing, when the call failed) once the jobs it took are running; plus
 * `ran(ms)` per job and `close()`. It needs only a way to read `wait`, a way to hand ids back, and a clock.
 */
import type { Clock } from '../clock.js'
import type { TakeNext, Taker } from '../redis/commands.js'

/** Jobs whose run time averages under this (ms) make a worker reserve its next candidates. */
export const HOT_RUN_MS = 10
/** Reserved ids unused this long (no finish took one) go back to `wait`: the jobs slowed down. */
export const RESERVATION_IDLE_MS = 100
/** Most ids a finish peeks at from the tail of `wait`. */
export const MAX_PEEK = 100
/** Reservations beyond `concurrency`: the job held in hand, and the next call's. */
const HELD_ROOM = 3

export interface TakeAheadOptions {
  concurrency: number
  /** Who takes: recorded in what a finish takes next. */
  taker: Taker
  /** How long a reservation lasts (ms): a lease, so a dead worker's come back once a sweep finds them expired. */
  reserveMs: number
  /** The worker runs this job already (a reply read late must not hand it out again). */
  running(id: string): boolean
  /** Up to n ids from the tail of `wait`, next first (lib/redis/queries.ts readCandidates). */
  read(n: number): Promise<string[]>
  /** Returns reserved ids to the front of `wait` (lib/redis/commands.ts unreserve). */
  giveBack(ids: string[]): Promise<unknown>
  clock: Clock
  onError(err: unknown): void
}

/** The candidates of one call, and for a finish what it sets aside for the calls after it. */
export interface Lookahead {
  ids: string[]
  /** Reserved by this worker (else peeked or read from `wait`). */
  reserved: boolean
  /** Ids to reserve, and to peek at, in the same call. */
  reserve: number
  peek: number
  /** For a finish (whose settling says the reserved ids are still used). */
  finish: boolean
}

/** What a call's reply said; undefined when the call failed (nothing was taken or set aside). */
export interface Settled {
  /** Candidates left where they were (the call took nothing of them: all of them when its run was lost). */
  left: string[]
  taken: number
  reservedNext?: string[]
  peeked?: string[]
}

const NOTHING: Lookahead = { ids: [], reserved: false, reserve: 0, peek: 0, finish: false }

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
  /** When a finish last settled (the clock's ms): reservations unused for long go back. */
  private lastFinishAt = 0
  private timer: unknown
  private closed = false

  constructor(private readonly o: TakeAheadOptions) {}

  /** A job ran for `ms`: what decides whether the worker reserves. */
  ran(ms: number): void {
    this.runMs = this.runMs === Number.POSITIVE_INFINITY ? ms : this.runMs * 0.9 + ms * 0.1
  }

  /** Up to `n` candidates for a take: reserved ids first, else peeked ones, else ids read from `wait`. */
  async forTake(n: number): Promise<Lookahead> {
    const next = this.next(n)
    if (next.ids.length > 0 || this.closed) return next
    const ids = await this.o.read(n)
    for (const id of ids) this.claimed.add(id)
    return { ...NOTHING, ids }
  }

  /**
   * The candidates a finish call of `runs` runs takes in the same call (one per run, and `extra` for the
   * job the worker holds in hand), and what it reserves or peeks at for the calls after it; nothing when
   * `take` is false (the worker is held back by its limiter).
   */
  forFinish(take = true, runs = 1, extra = 0): Lookahead {
    if (this.closed || !take) return { ids: [], reserved: false, reserve: 0, peek: 0, finish: true }
    const look = this.next(runs + extra)
    const { reserve, peek } = this.plan(runs)
    look.reserve = reserve
    look.peek = peek
    look.finish = true
    return look
  }

  /** What a finish call carries: the candidates and plan of `forFinish`, with who takes them. */
  takeNext(look: Lookahead): TakeNext {
    const t = this.o.taker
    const next: TakeNext = {
      workerToken: t.workerToken,
      leaseMs: t.leaseMs,
      workerName: t.workerName,
      candidates: look.ids,
      reservedCandidates: look.reserved,
      reserve: look.reserve,
      reserveMs: this.o.reserveMs,
      peek: look.peek,
    }
    if (t.limit) next.limit = t.limit
    return next
  }

  /** Jobs are short (their runs average under HOT_RUN_MS): the worker reserves, and may hold a job in hand. */
  get hot(): boolean {
    return this.runMs < HOT_RUN_MS
  }

  /**
   * The call that had `look` returned, and the jobs it took are running (or it failed: `reply`
   * undefined). Reserved candidates it left are still reserved: they are next again.
   */
  settle(look: Lookahead, reply: Settled | undefined): void {
    const left = reply?.left ?? look.ids
    if (look.reserved) this.pool.unshift(...left)
    else {
      for (const id of look.ids) this.claimed.delete(id)
      if (reply && reply.taken + left.length < look.ids.length) this.contended = true
    }
    if (look.reserve > 0 || look.peek > 0) {
      this.reserving -= look.reserve
      this.pool.push(...(reply?.reservedNext ?? []))
      if (look.peek > 0) {
        this.peekPending = false
        this.contended = false
        if (reply?.peeked) this.hint = reply.peeked.filter((id) => !this.claimed.has(id) && !this.o.running(id))
      }
    }
    if (look.finish && reply) this.lastFinishAt = this.o.clock.now()
    if (this.closed) this.returnReserved()
    else this.watch()
  }

  /** Stops reserving and hands every reserved id back to `wait`; resolves once Redis answered. */
  async close(): Promise<void> {
    this.closed = true
    if (this.timer !== undefined) this.o.clock.clearTimeout(this.timer)
    this.timer = undefined
    await this.returnReserved()
  }

  get reservedCount(): number {
    return this.pool.length
  }

  private next(n: number): Lookahead {
    if (this.pool.length > 0) return { ids: this.pool.splice(0, n), reserved: true, reserve: 0, peek: 0, finish: false }
    const ids: string[] = []
    while (ids.length < n && this.hint.length > 0) {
      const id = this.hint.shift() as string
      if (this.claimed.has(id) || this.o.running(id)) continue
      ids.push(id)
    }
    for (const id of ids) this.claimed.add(id)
    return { ids, reserved: false, reserve: 0, peek: 0, finish: false }
  }

  /**
   * What a finish of `runs` runs sets aside for the calls after it: ids to reserve, or ids to peek at. The
   * reserved pool keeps up with `concurrency` plus the job a worker holds in hand and one call in flight.
   */
  private plan(runs: number): { reserve: number; peek: number } {
    if (this.runMs < HOT_RUN_MS) {
      const room = this.o.concurrency + HELD_ROOM - this.pool.length - this.reserving
      const reserve = Math.max(0, Math.min(2 * runs, room))
      this.reserving += reserve
      return { reserve, peek: 0 }
    }
    // A peek every ~concurrency calls: while the hint holds enough ids for the calls that may be sent
    // before a peek asked now comes back, or while one is pending, none.
    if (!this.contended && (this.peekPending || this.hint.length >= this.o.concurrency + 2)) return { reserve: 0, peek: 0 }
    this.peekPending = true
    return { reserve: 0, peek: Math.min(3 * this.o.concurrency + 8, MAX_PEEK) }
  }

  /** While ids are reserved, checks that finishes still use them; unused for RESERVATION_IDLE_MS, they go back. */
  private watch(): void {
    if (this.timer !== undefined || this.pool.length === 0) return
    const check = () => {
      this.timer = undefined
      if (this.closed || this.pool.length === 0) return
      const idle = this.o.clock.now() - this.lastFinishAt
      if (idle >= RESERVATION_IDLE_MS) void this.returnReserved()
      else this.timer = this.o.clock.setTimeout(check, RESERVATION_IDLE_MS - idle)
    }
    this.timer = this.o.clock.setTimeout(check, RESERVATION_IDLE_MS)
  }

  private async returnReserved(): Promise<void> {
    const ids = this.pool.splice(0)
    if (ids.length === 0) return
    try {
      await this.o.giveBack(ids)
    } catch (err) {
      this.o.onError(err)
    }
  }
}
