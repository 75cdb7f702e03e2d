/**
 * Batcher: the finishes a worker asks for in one tick go out together, in calls of at most `batchMax`.
 * Jobs that end at once (short jobs at a high concurrency) then share one script call, which does what
 * they have in common once. The cap keeps a second call in flight while Redis runs the first, so the
 * worker and Redis work side by side rather than by turns; with `batchMax` 1 every finish is its own
 * call, as before. At most `maxInFlight` calls are out at once: what is added meanwhile waits for one
 * to come back and goes out with the rest of its wait. Without that bound, short jobs that end a few
 * at a time each start their own call (one reply's jobs end in one tick, their call's reply's in
 * another), and each call's fixed cost in Redis (the script's preamble, its reads of the queue's
 * state) is shared by a few jobs only. It needs only a `send` that answers each item of a group, in
 * order. `poke()` makes a call go out with nothing added (`send([])`), for what the sender carries on
 * its own.
 */
export class Batcher<T, R> {
  private pending: { item: T; resolve(result: R): void; reject(err: unknown): void }[] = []
  private scheduled = false
  private poked = false
  private inFlight = 0

  constructor(
    private readonly batchMax: number,
    private readonly send: (items: T[]) => Promise<R[]>,
    private readonly maxInFlight = Number.POSITIVE_INFINITY,
  ) {}

  /** Queues `item`; the calls go out once the current tick's work is done. */
  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ item, resolve, reject })
      this.schedule()
    })
  }

  /** A call goes out this tick even if nothing is added. */
  poke(): void {
    this.poked = true
    this.schedule()
  }

  private schedule(): void {
    if (this.scheduled) return
    this.scheduled = true
    process.nextTick(() => this.flush())
  }

  private flush(): void {
    this.scheduled = false
    if (this.pending.length === 0 && this.poked && this.inFlight < this.maxInFlight) {
      this.poked = false
      void this.sendGroup([])
    }
    while (this.pending.length > 0 && this.inFlight < this.maxInFlight) {
      this.poked = false
      void this.sendGroup(this.pending.splice(0, this.batchMax))
    }
  }

  private async sendGroup(group: Batcher<T, R>['pending']): Promise<void> {
    this.inFlight++
    let results: R[] | undefined
    let failure: unknown
    try {
      results = await this.send(group.map((g) => g.item))
    } catch (err) {
      failure = err
    } finally {
      this.inFlight--
      // What waited for this call goes out now (in this tick, with what its answers add).
      if (this.pending.length > 0 || this.poked) this.schedule()
    }
    if (results === undefined) for (const g of group) g.reject(failure)
    else for (const [i, g] of group.entries()) g.resolve(results[i] as R)
  }
}
