/**
 * TakeAhead: how a busy worker takes its next jobs without a read of its own. Each finish call takes the
 * next jobs in the same round trip (as many as the runs it ends freed slots); their candidates come from
 * one of two places:
 *
 * - Reservations, while jobs are short (their run time averages under HOT_RUN_MS): each finish also pops
 *   the next ids from `wait` into `reserved` for this worker (lua/includes/takeJobs.lua reserveNext), and
 *   reads the first of them into the worker's hand (worker/hand.ts). No two workers ever get the same id,
 *   however many peek at the same queue, and a reserved job waits about one job's run time before it
 *   starts. The bound: the jobs a worker has set aside for later calls (its reserved ids, the job in its
 *   hand, and those its calls in flight are reserving or reading) are never more than `concurrency +
 *   AHEAD_ROOM`; the jobs its calls in flight are taking fill slots already free. Reserved ids the worker
 *   will not take go back to the front of `wait`: when it closes, and when no finish has used them for
 *   RESERVATION_IDLE_MS (its jobs slowed down; a timer of this module's watches that). A dead worker's
 *   come back with the next sweep once they expire, with no attempt used: none of them started.
 * - A peek, otherwise: a finish reads the ids at the tail of `wait` (without taking them) about once every
 *   `concurrency` calls; later calls take them if they are still there. An id handed to a call in flight
 *   is claimed until the jobs it took are running, so no two calls of one worker try the same id. A take
 *   whose candidates other workers got first reserves as many in their place (take-11.lua), so a worker
 *   with free slots takes for certain on its next call rather than racing for the same tail again.
 *
 * The worker makes two calls per take or finish: `forTake(n)` / `forFinish()` before the call, `settle`
 * with what the reply said (or nothing, when the call failed) once the jobs it took are running; plus
 * `ran(ms)` per job and `close()`. It needs only a way to read `wait`, a way to hand ids back, how many
 * jobs the worker holds in hand, and a clock.
 */
import type { Clock } from '../clock.js'
import type { TakeNext, Taker } from '../redis/commands.js'

/** Jobs whose run time averages under this (ms) make a worker reserve its next candidates. */
export const HOT_RUN_MS = 10
/** Reserved ids unused this long (no finish took one) go back to `wait`: the jobs slowed down. */
export const RESERVATION_IDLE_MS = 100
/** Most ids a finish peeks at from the tail of `wait`. */
const MAX_PEEK = 100
/**
 * Jobs a worker sets aside beyond `concurrency` (reserved, in hand, or being reserved or read): the job in
 * hand, and the next call's candidate while the hand's is read (with one, a worker at concurrency 1 whose
 * jobs end within a round trip makes a call more per job). The one bound the README states.
 */
export const AHEAD_ROOM = 2

export interface TakeAheadOptions {
  concurrency: number
  /** Who takes: recorded in what a finish takes next. */
  taker: Taker
  /** How long a reservation lasts (ms): a lease, so a dead worker's come back once a sweep finds them expired. */
  reserveMs: number
  /** The worker runs this job already (a reply read late must not hand it out again). */
  running(id: string): boolean
  /**
   * Up to n ids next in line, next first, then up to `more` of `wait`'s after them (lib/redis/queries.ts
   * readCandidates).
   */
  read(n: number, more?: number): Promise<string[]>
  /** Returns reserved ids to the front of `wait` (lib/redis/commands.ts unreserve). */
  giveBack(ids: string[]): Promise<unknown>
  /** How many jobs the worker holds in hand (reserved ids read, not started). */
  held(): number
  /** Jobs the worker may still take or set aside, those set aside included (none given: no bound). */
  budget?(): number
  clock: Clock
  onError(err: unknown): void
}

/** The candidates of one call, and for a finish what it sets aside for the calls after it. */
export interface Lookahead {
  /** When the call was planned (the clock's ms): what it reserves was reserved a little later. */
  at: number
  ids: string[]
  /** Reserved by this worker (else peeked or read from `wait`). */
  reserved: boolean
  /** Ids to reserve, and to peek at, in the same call. */
  reserve: number
  peek: number
  /** Reserved ids to read into the hand in the same call. */
  hand: string[]
  /** For a finish (whose settling says the reserved ids are still used). */
  finish: boolean
}

/** What a call's reply said; undefined when the call failed (nothing was taken or set aside). */
export interface Settled {
  /** Candidates left where they were (the call took nothing of them: all of them when its run was lost). */
  left: string[]
  taken: number
  /** Ids reserved for this worker by the call (for the calls after it, or in place of candidates found gone). */
  reservedNext?: string[]
  peeked?: string[]
  /** Of the ids to read into the hand, those read (the others stay reserved, next again). */
  handed?: string[]
}

const nothing = (at = 0): Lookahead => ({ at, ids: [], reserved: false, reserve: 0, peek: 0, hand: [], finish: false })

export class TakeAhead {
  /** Ids reserved for this worker, the next to be served first. */
  private readonly pool: string[] = []
  /** When each reserved id was asked for (the clock's ms, a little before Redis reserved it). */
  private readonly reservedAt = new Map<string, number>()
  /** Reservations asked for whose reply is not back yet. */
  private reserving = 0
  /**
   * Reserved ids being read into the hand by calls in flight, next first. A later call that needs
   * candidates for free slots takes them over (they are next in line): their read then goes unused.
   */
  private reading: string[] = []
  private readonly takenOver = new Set<string>()
  /** Ids the last peek saw at the tail of `wait`, the next to be served first. */
  private hint: string[] = []
  private readonly claimed = new Set<string>()
  private peekPending = false
  /** A peeked candidate was gone when its call ran (other workers take from the same tail). */
  private contended = false
  /** The average run time of this worker's jobs (ms), smoothed. */
  private runMs = Number.POSITIVE_INFINITY
  /** How long a call takes from being planned to its jobs running (ms), smoothed: the round trip. */
  private callMs = Number.POSITIVE_INFINITY
  /** When a finish last settled (the clock's ms): reservations unused for long go back. */
  private lastFinishAt = 0
  private timer: unknown
  private closed = false

  constructor(private readonly o: TakeAheadOptions) {}

  /**
   * The queue is paused or held back: ids peeked at are stale by the time it is not (jobs added meanwhile,
   * a lifo one in front of them), so the next take reads the line again.
   */
  forgetPeeked(): void {
    this.hint = []
  }

  /** A job ran for `ms`: what decides whether the worker reserves. */
  ran(ms: number): void {
    this.runMs = this.runMs === Number.POSITIVE_INFINITY ? ms : this.runMs * 0.9 + ms * 0.1
  }

  /** Up to `n` candidates for a take: reserved ids first, else peeked ones, else ids read from `wait`. */
  async forTake(n: number): Promise<Lookahead> {
    const next = this.next(n)
    if (next.ids.length > 0 || this.closed || this.room() <= 0) return next
    // The ids of `wait` after them are what the first finish takes (as a peek's): a worker that starts
    // takes its second round of jobs in that finish, not in a take of its own once the finish reserved them
    // (a worker function starts every invocation).
    const first = Math.min(n, this.room())
    const read = await this.o.read(first, Math.max(0, Math.min(this.o.concurrency, this.room() - first)))
    const ids = read.slice(0, first)
    for (const id of ids) this.claimed.add(id)
    if (this.hint.length === 0) this.hint = read.slice(first)
    return { ...nothing(this.o.clock.now()), ids }
  }

  /**
   * The candidates a finish call of `runs` runs takes in the same call (`free` of them: the slots free
   * and not promised to another call), the reserved ids it reads into the hand (so that the worker holds
   * `inHand` jobs), and what it reserves or peeks at for the calls after it; nothing when `take` is false
   * (the worker is paused or held back by its limiter). A call that ends no run (it confirms starts from
   * the hand) reserves and peeks at nothing.
   */
  forFinish(take = true, runs = 1, free = runs, inHand = 0): Lookahead {
    if (this.closed || !take) return { ...nothing(this.o.clock.now()), finish: true }
    const look = this.next(free)
    // At concurrency 1 with jobs shorter than a round trip, only a call that takes the next job reads the
    // one after into the hand (see handSize): a call that confirms a start reads nothing, as that job ends
    // before such a read would come back.
    const alternate = this.o.concurrency === 1 && this.runMs < this.callMs && look.ids.length === 0
    const toRead = alternate ? 0 : Math.max(0, inHand - this.o.held() - this.readingCount())
    // Only a fresh reservation goes to the hand: its token holds while no one else can take the job.
    const head = this.pool[0]
    const fresh = head !== undefined && look.at - (this.reservedAt.get(head) ?? look.at) < this.o.reserveMs / 4
    look.hand = fresh ? this.pool.splice(0, toRead) : []
    this.reading.push(...look.hand)
    const { reserve, peek } = runs > 0 ? this.plan(runs, look.ids.length) : { reserve: 0, peek: 0 }
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
      hand: look.hand,
    }
    if (t.limit) next.limit = t.limit
    return next
  }

  /** Jobs are short (their runs average under HOT_RUN_MS): the worker reserves, and may hold a job in hand. */
  get hot(): boolean {
    return this.runMs < HOT_RUN_MS
  }

  /**
   * Jobs to hold in hand: one while jobs are short. At concurrency 1 with jobs shorter than a round trip,
   * a read into the hand by every call would come back after the job it was meant to follow had ended, so
   * the next call would take that job over and the read be for nothing. There the calls alternate
   * (forFinish): one takes the next job and reads the one after into the hand; that one starts the
   * moment the first returns, and its call confirms it and reads nothing. Two jobs run per round trip
   * waited for, one call each, where taking every job in its finish waits a round trip per job.
   */
  handSize(): number {
    return this.hot ? 1 : 0
  }

  /**
   * The call that had `look` returned, and the jobs it took are running (or it failed: `reply`
   * undefined). Reserved candidates it left are still reserved: they are next again. Returns the jobs it
   * read into the hand that the worker is to hold (not those a later call took over), with when each was
   * reserved.
   */
  settle(look: Lookahead, reply: Settled | undefined): Map<string, number> {
    const left = reply?.left ?? look.ids
    const hold = new Map<string, number>()
    if (look.hand.length > 0) {
      const handed = new Set(reply?.handed)
      const unread: string[] = []
      for (const id of look.hand) {
        this.reading.splice(this.reading.indexOf(id), 1)
        if (this.takenOver.delete(id)) continue
        if (handed.has(id)) {
          hold.set(id, this.reservedAt.get(id) ?? look.at)
          this.reservedAt.delete(id)
        }
        // Not read (the queue was paused, the call failed): still reserved, next again.
        else unread.push(id)
      }
      this.pool.unshift(...unread)
    }
    if (look.reserved) {
      this.pool.unshift(...left)
      const kept = new Set(left)
      for (const id of look.ids) if (!kept.has(id)) this.reservedAt.delete(id)
    } else {
      for (const id of look.ids) this.claimed.delete(id)
      // Others took candidates first: what the hint holds is stale too.
      if (reply && reply.taken + left.length < look.ids.length) {
        this.contended = true
        this.hint = []
      }
    }
    this.reserving -= look.reserve
    for (const id of reply?.reservedNext ?? []) {
      this.pool.push(id)
      this.reservedAt.set(id, look.at)
    }
    if (look.reserve > 0 || look.peek > 0) {
      if (look.peek > 0) {
        this.peekPending = false
        this.contended = false
        if (reply?.peeked) this.hint = reply.peeked.filter((id) => !this.claimed.has(id) && !this.o.running(id))
      }
    }
    if (reply) {
      const ms = this.o.clock.now() - look.at
      this.callMs = this.callMs === Number.POSITIVE_INFINITY ? ms : this.callMs * 0.9 + ms * 0.1
    }
    if (look.finish && reply) this.lastFinishAt = this.o.clock.now()
    if (this.closed) this.returnReserved()
    else this.watch()
    return hold
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

  /** The jobs set aside for later calls: reserved ids, the hand, and what calls in flight reserve or read. */
  setAside(): number {
    return this.pool.length + this.reserving + this.readingCount() + this.o.held()
  }

  /** Jobs the worker may take or set aside beyond those it has set aside (the budget: MAX_STARTS). */
  room(): number {
    return (this.o.budget?.() ?? Number.POSITIVE_INFINITY) - this.setAside()
  }

  private readingCount(): number {
    return this.reading.length - this.takenOver.size
  }

  /** Candidates in line order: ids being read into the hand (taken over), then the pool, else the hint. */
  private next(n: number): Lookahead {
    const at = this.o.clock.now()
    if (n <= 0) return nothing(at)
    const reserved: string[] = []
    for (const id of this.reading) {
      if (reserved.length === n) break
      if (this.takenOver.has(id)) continue
      this.takenOver.add(id)
      reserved.push(id)
    }
    reserved.push(...this.pool.splice(0, n - reserved.length))
    if (reserved.length > 0) return { ...nothing(at), ids: reserved, reserved: true }
    const ids: string[] = []
    // Ids not set aside count against the budget; reserved ones already do.
    const most = Math.min(n, this.room())
    while (ids.length < most && this.hint.length > 0) {
      const id = this.hint.shift() as string
      if (this.claimed.has(id) || this.o.running(id)) continue
      ids.push(id)
    }
    for (const id of ids) this.claimed.add(id)
    return { ...nothing(at), ids }
  }

  /**
   * What a finish of `runs` runs sets aside for the calls after it (`taking` ids taken by the call itself):
   * ids to reserve, or ids to peek at. What is set aside (reserved, in hand, or being reserved or read)
   * stays within `concurrency + AHEAD_ROOM`, and within the budget.
   */
  private plan(runs: number, taking: number): { reserve: number; peek: number } {
    if (this.runMs < HOT_RUN_MS) {
      // The call's candidates left what is set aside, and are not in flight yet: they count against the budget.
      const room = Math.min(this.o.concurrency + AHEAD_ROOM - this.setAside(), this.room() - taking)
      // Two at a time while the pool still holds one: a reservation costs two commands whatever its size.
      const want = Math.max(0, Math.min(2 * runs, room))
      const reserve = want >= 2 || this.pool.length === 0 ? want : 0
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
    for (const id of ids) this.reservedAt.delete(id)
    try {
      await this.o.giveBack(ids)
    } catch (err) {
      this.o.onError(err)
    }
  }
}
