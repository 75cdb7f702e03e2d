/**
 * Batcher: the finishes a worker asks for in one tick go out together, in calls of at most `batchMax`.
 * Jobs that end at once (short jobs at a high concurrency) then share one script call, which does what
 * they have in common once. The cap keeps a second call in flight while Redis runs the first, so the
 * worker and Redis work side by side rather than by turns; with `batchMax` 1 every finish is its own
 * call, as before. It needs only a `send` that answers each item of a group, in order.
 */
export class Batcher<T, R> {
  private pending: { item: T; resolve(result: R): void; reject(err: unknown): void }[] = []

  constructor(
    private readonly batchMax: number,
    private readonly send: (items: T[]) => Promise<R[]>,
  ) {}

  /** Queues `item`; the calls go out once the current tick's work is done. */
  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ item, resolve, reject })
      if (this.pending.length === 1) process.nextTick(() => this.flush())
    })
  }

  private flush(): void {
    const all = this.pending
    this.pending = []
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
