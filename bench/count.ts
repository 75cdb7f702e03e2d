/**
 * Counts the commands clients in this process SEND to Redis, by client and command name, the way
 * per-command pricing bills them: a script call counts once, the commands it runs inside Redis not at
 * all. ioredis's Redis.prototype.sendCommand is wrapped while installed (every command, pipelined or
 * not, of every client, BullMQ's included, goes through it). A client is labelled with label(); a
 * duplicate() (a Worker's blocking connection) inherits its parent's label; clients nobody labelled (the
 * reaper's own connection) count under UNLABELLED.
 */
import { Redis } from 'ioredis'

export const UNLABELLED = 'unlabelled'

type Proto = {
  sendCommand(this: Redis, command: { name: string }, ...rest: unknown[]): unknown
  duplicate(this: Redis, ...args: unknown[]): Redis
}

export class SentCommands {
  private readonly counts = new Map<string, Record<string, number>>()
  private readonly labels = new WeakMap<object, string>()
  private restore: (() => void) | undefined

  /** Starts counting (every client of this process). */
  install(): this {
    if (this.restore) return this
    const proto = Redis.prototype as unknown as Proto
    const { sendCommand, duplicate } = proto
    const self = this
    proto.sendCommand = function (this: Redis, command, ...rest) {
      const label = self.labels.get(this) ?? UNLABELLED
      const byName = self.counts.get(label) ?? {}
      const name = String(command.name).toLowerCase()
      byName[name] = (byName[name] ?? 0) + 1
      self.counts.set(label, byName)
      return sendCommand.call(this, command, ...rest)
    }
    proto.duplicate = function (this: Redis, ...args) {
      const copy = duplicate.apply(this, args)
      const label = self.labels.get(this)
      if (label !== undefined) self.labels.set(copy, label)
      return copy
    }
    this.restore = () => {
      proto.sendCommand = sendCommand
      proto.duplicate = duplicate
    }
    return this
  }

  uninstall(): void {
    this.restore?.()
    this.restore = undefined
  }

  label<C extends object>(client: C, label: string): C {
    this.labels.set(client, label)
    return client
  }

  reset(): void {
    this.counts.clear()
  }

  /** Commands sent by clients with this label since the last reset, by name. */
  sent(label: string): Record<string, number> {
    return { ...(this.counts.get(label) ?? {}) }
  }

  total(label: string): number {
    return Object.values(this.counts.get(label) ?? {}).reduce((a, b) => a + b, 0)
  }
}
