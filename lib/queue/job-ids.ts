/**
 * The ids EchoMQ gives jobs added without a `jobId`: "1", "2", "3"... per queue, as BullMQ's. A script
 * may touch only the keys it is given, so the id (part of the job's key) is known before the add: a
 * Queue reserves ids from the queue's counter (meta's `ids`, one HINCRBY) in blocks that double from 1
 * up to MAX_BLOCK, so a short-lived producer wastes few numbers and a busy one reserves once per
 * thousand adds. Producers share the counter, so ids are unique; each producer's are increasing. A
 * custom id may not be an integer (as in BullMQ; lib/options.ts), so the two never meet.
 */
export const MAX_BLOCK = 1_000

export class JobIds {
  /** The next id to give, and the last one reserved: nothing reserved yet. */
  private next = 1
  private end = 0
  private block = 1
  private queue: Promise<unknown> = Promise.resolve()
  /** Calls waiting for a block: a later call must not take ahead of them. */
  private waiting = 0

  /** `reserve(n)` adds n to the counter and resolves to its new value (the last id reserved). */
  constructor(private readonly reserve: (n: number) => Promise<number>) {}

  /** `n` fresh ids when the block in hand has them (no call waiting before this one), else undefined. */
  takeNow(n: number): string[] | undefined {
    if (this.waiting > 0 || this.next + n - 1 > this.end) return undefined
    const ids: string[] = []
    for (let i = 0; i < n; i++) ids.push(String(this.next++))
    return ids
  }

  /** `n` fresh ids, in order. Calls are served one at a time, so no two get the same. */
  take(n: number): Promise<string[]> {
    const now = this.takeNow(n)
    if (now) return Promise.resolve(now)
    this.waiting++
    const taken = this.queue.then(async () => {
      const ids: string[] = []
      while (ids.length < n) {
        if (this.next > this.end) {
          const size = Math.max(this.block, n - ids.length)
          this.block = Math.min(this.block * 2, MAX_BLOCK)
          this.end = await this.reserve(size)
          this.next = this.end - size + 1
        }
        ids.push(String(this.next++))
      }
      return ids
    })
    this.queue = taken.then(
      () => this.waiting--,
      () => this.waiting--,
    )
    return taken
  }
}
