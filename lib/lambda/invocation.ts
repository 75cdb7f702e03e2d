/**
 * An invocation's mark in Redis (`<prefix>:{q}:invocations`, lua/invocation-1.lua), so the reaper knows how
 * many worker functions are alive before it starts more: entered with a lease of one lockDuration (in the
 * write of the Worker's first commands), renewed every half lease while the invocation runs, removed once
 * no processor of it runs and none will start (in the write of its last finish), or when it returns. A
 * function killed or frozen stops renewing and stops counting within one lease. Only queues served by
 * worker functions have the key; nothing else reads or writes it.
 */
import type { Clock } from '../clock.js'
import { invocation } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'

export class InvocationMark {
  private timer: unknown
  private stopped = false
  private leaving: Promise<void> | undefined

  constructor(
    private readonly client: RedisClient,
    private readonly keys: QueueKeys,
    private readonly id: string,
    private readonly leaseMs: number,
    private readonly clock: Clock,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Enters; resolves to the live invocations, this one included. */
  async enter(): Promise<number> {
    const live = await invocation(this.client, this.keys, 'enter', this.id, this.leaseMs)
    this.arm()
    return live
  }

  /**
   * Stops renewing and leaves, once: a second call returns the first's promise (a failure to leave only
   * means the mark lasts its lease).
   */
  leave(): Promise<void> {
    if (this.leaving) return this.leaving
    this.stopped = true
    this.clock.clearTimeout(this.timer)
    this.leaving = invocation(this.client, this.keys, 'leave', this.id, 0).then(
      () => undefined,
      () => undefined,
    )
    return this.leaving
  }

  private arm(): void {
    if (this.stopped) return
    this.timer = this.clock.setTimeout(
      () => {
        invocation(this.client, this.keys, 'enter', this.id, this.leaseMs).then(
          () => this.arm(),
          (err) => {
            this.onError(err)
            this.arm()
          },
        )
      },
      Math.max(1, Math.floor(this.leaseMs / 2)),
    )
  }
}
