/** A clock whose time moves only when the test says so; timers fire in order as it advances. */
import type { Clock } from '../../lib/clock.js'

export class ManualClock implements Clock {
  private time = 0
  private seq = 0
  private readonly timers = new Map<number, { at: number; fn: () => void }>()

  now(): number {
    return this.time
  }

  setTimeout(fn: () => void, ms: number): number {
    const id = ++this.seq
    this.timers.set(id, { at: this.time + ms, fn })
    return id
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number)
  }

  get pending(): number {
    return this.timers.size
  }

  /** Moves time forward without firing anything, as for a process that was paused (SIGSTOP, a long GC). */
  jump(ms: number): void {
    this.time += ms
  }

  /** Moves time forward, firing due timers and letting the promises they start settle. */
  async advance(ms: number): Promise<void> {
    const until = this.time + ms
    for (let i = 0; i < 20; i++) await Promise.resolve()
    for (;;) {
      const due = [...this.timers.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at)[0]
      if (!due) break
      this.timers.delete(due[0])
      this.time = Math.max(this.time, due[1].at)
      due[1].fn()
      for (let i = 0; i < 20; i++) await Promise.resolve()
    }
    this.time = until
  }
}
