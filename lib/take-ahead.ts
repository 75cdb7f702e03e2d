/**
 * TakeAhead: how a busy worker takes its next jobs without a read of its own. Each finish call peeks at
 * the tail of `wait`; those ids (the hint) are the candidates for the next take or finish. An id handed
 * to a call in flight is claimed until that call returns, so no two calls of one worker try the same id
 * (the script would skip the second anyway; claiming saves the wasted candidate).
 */
export class TakeAhead {
  /** Ids the last finish saw at the tail of `wait`, the next to be served first. */
  private hint: string[] = []
  private readonly claimed = new Set<string>()

  /** Up to `n` ids from the last peek that no call has in flight; each stays claimed until `release`. */
  claim(n: number): string[] {
    const ids: string[] = []
    while (ids.length < n && this.hint.length > 0) {
      const id = this.hint.shift() as string
      if (this.claimed.has(id)) continue
      this.claimed.add(id)
      ids.push(id)
    }
    return ids
  }

  /** The call that had these ids returned. */
  release(ids: string[]): void {
    for (const id of ids) this.claimed.delete(id)
  }

  /** Ids a finish saw at the tail of `wait`; those already claimed are left out. */
  remember(peeked: string[]): void {
    this.hint = peeked.filter((id) => !this.claimed.has(id))
  }
}
