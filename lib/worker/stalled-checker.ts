/**
 * StalledChecker: the stalled sweep a BullMQ program expects its workers to run (BullMQ has no reaper).
 * Every `intervalMs` (BullMQ's stalledInterval, 30 s) the worker claims the queue's `stalled-check` key
 * with SET NX PX intervalMs: the one worker that wins runs one pass of the sweep (lib/sweep.ts: the
 * two-phase stalled sweep, due delayed jobs, trims); the others do nothing more. Idle cost: one SET per
 * worker per interval, and for the winner the sweep's probe (one call on an idle queue): at the default,
 * 2 commands a minute per worker plus 2 a minute per queue. `skipStalledCheck: true` turns it off (when the
 * reaper sweeps). One timer, cleared by close(); a pass in flight is awaited by close().
 */
import type { Clock } from '../clock.js'
import type { SweepSettings } from '../options.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { claimStalledCheck } from '../redis/queries.js'
import { sweepQueue } from '../sweep.js'

export interface StalledCheckerOptions {
  client: RedisClient
  keys: QueueKeys
  intervalMs: number
  sweep: SweepSettings
  clock: Clock
  onError(err: unknown): void
  /** After a pass that recovered or failed jobs (for the worker's `stalled` and `failed` events). */
  onStalled(pass: { recovered: string[]; failed: string[]; failedJobs?: Map<string, Record<string, string>> | undefined }): void
}

export class StalledChecker {
  private timer: unknown
  private closed = false
  private running: Promise<void> = Promise.resolve()

  constructor(private readonly o: StalledCheckerOptions) {}

  /** The first check now (as BullMQ's worker makes it on start), then one every interval. */
  start(): void {
    if (this.o.intervalMs > 0) this.tick()
  }

  /** Stops the timer; settles once a pass in flight has ended. */
  close(): Promise<void> {
    this.closed = true
    this.o.clock.clearTimeout(this.timer)
    return this.running
  }

  private tick(): void {
    if (this.closed) return
    this.running = this.check().finally(() => {
      if (!this.closed) this.timer = this.o.clock.setTimeout(() => this.tick(), this.o.intervalMs)
    })
  }

  private async check(): Promise<void> {
    const { client, keys, intervalMs, sweep } = this.o
    try {
      if (!(await claimStalledCheck(client, keys, intervalMs))) return
      const pass = await sweepQueue(client, keys, sweep)
      if (pass.recovered.length + pass.failed.length > 0) this.o.onStalled(pass)
    } catch (err) {
      if (!this.closed) this.o.onError(err)
    }
  }
}
