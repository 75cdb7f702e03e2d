/**
 * BullMQ's worker runs: a run lasts from `run()` (or the construction, with autorun) until the worker is
 * paused with no job running, or closed; `resume()` starts another. `run()` resolves when its run ends, and
 * `isRunning()` is true during one. The loops (heartbeat, take loop, stalled sweep) start with the first run
 * and stay: a paused worker's loop waits for `resume()` (worker/taking.ts).
 */
export class RunCycles {
  private loopsStarted = false
  private end: (() => void) | undefined

  constructor(private readonly startLoops: () => void) {}

  get running(): boolean {
    return this.end !== undefined
  }

  get begun(): boolean {
    return this.loopsStarted
  }

  /** Starts a run (the loops too, the first time); resolves when it ends. */
  begin(): Promise<void> {
    if (!this.loopsStarted) {
      this.loopsStarted = true
      this.startLoops()
    }
    return new Promise((resolve) => {
      this.end = resolve
    })
  }

  /** Ends the run under way, if any. */
  stop(): void {
    const end = this.end
    this.end = undefined
    end?.()
  }
}
