/**
 * Batcher: the finishes a worker asks for in one tick go out together, in calls of at most `batchMax`.
 * Jobs that end at once (short jobs at a high concurrency) then share one script call, which does what
 * they have in common once. The cap keeps a second call in flight while Redis runs the first, so the
 * worker and Redis work side by side rather than by turns; with `batchMax` 1 every finish is its own
 * call, as before. It needs only a `send` that answers each item of a group, in order. `poke()` makes a
 * call go out this tick with nothing added (`send([])`), for what the sender carries on its own.
 */
export class Batcher<T, R> {
  private pending: { item: T; resolve(result: R): void; reject(err: unknown): void }[] = []
  private scheduled = false
  private poked = false

  constructor(
    private readonly batchMax: number,
    private readonly send: (items: T[]) => Promise<R[]>,
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
    const all = this.pending
    const poked = this.poked
    this.pending = []
    this.poked = false
    if (all.length === 0 && poked) void this.sendGroup([])
    for (let i = 0; i < all.length; i += this.batchMax) void this.sendGroup(all.slice(i, i + this.batchMax))
  }

  private async sendGroup(group: Batcher<T, R>['pending']): Promise<void> {
    let results: R[]
    try {
      results = await this.send(group.map((g) => g.item))
    } catch (err) {
      for (const g of group) g.reject(err)
      return
    }
    for (const [i, g] of group.entries()) g.resolve(results[i] as R)
  }
}
