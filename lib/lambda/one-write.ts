/**
 * Commands an invocation sends at its edges, held and written together: at its start the mark and its
 * Worker's first commands (registration, the read of candidates), at its end the leave and the last
 * run's finish. Each write is a wake-up of Redis (a read, a reply written, an event-loop turn, the
 * caches it left cold): what callgrind's instruction count does not see, and at 100 jobs an invocation
 * the edges were 5 of its 16 writes. Redis runs the commands in the order they were sent, as before.
 */
import type { RedisClient } from '../redis/connection.js'

interface Corkable {
  cork(): void
  uncork(): void
  writable?: boolean
}

/**
 * Runs `send` (which sends synchronously) with the connection's writes held: they leave together, with
 * whatever else is sent later in this turn of the event loop (a finish the Worker sends from a nextTick),
 * at its end (setImmediate). A connection not up yet (its commands wait in ioredis's queue) or a Cluster
 * (no one socket) sends as usual.
 */
export function inOneWrite<T>(client: RedisClient, send: () => T): T {
  const stream = (client as { stream?: Partial<Corkable> }).stream
  if (client.status !== 'ready' || !stream?.cork || !stream.uncork || stream.writable === false) return send()
  const held = stream as Corkable
  held.cork()
  try {
    return send()
  } finally {
    setImmediate(() => held.uncork())
  }
}
