/**
 * How a connection's failure reaches the caller of a Queue, Worker or QueueEvents: one error shape for
 * all three (what failed, why, and where the connection goes, password masked), and a bounded wait for a
 * connection to be ready (waitUntilReady).
 */
import { type EchoMQError, redisError } from '../errors.js'
import { type Connection, lastConnectionError, type RedisClient } from './connection.js'

/**
 * A failed call of a Queue, Worker or QueueEvents as one EchoMQError shape: `<what> <queue>: <why>`, the
 * connection's last error named (a refused AUTH, ECONNREFUSED...), and for a connection failure where it
 * went, password masked. The `cause` keeps no password (withoutSecrets, in redisError).
 */
export function connectionFailure(conn: Connection, queue: string, what: string, err: unknown): EchoMQError {
  const failure = redisError(queue, what, err, lastConnectionError(conn.client))
  if (failure.code === 'ERR_CONNECTION' && conn.where && !failure.message.includes(conn.where)) failure.message += ` (${conn.where})`
  return failure
}

/** How long a Worker's waitUntilReady() waits for its connection: a Queue's call is bounded alike (5 s). */
export const READY_TIMEOUT_MS = 5_000

/**
 * Resolves once the client is ready (BullMQ's RedisConnection.waitUntilReady); rejects, with the last
 * connection error, when it ends (as BullMQ's) or is not ready within `timeoutMs` (EchoMQ reconnects for
 * ever, where BullMQ's wait would have no end).
 */
export function untilReady(client: RedisClient, timeoutMs = READY_TIMEOUT_MS): Promise<void> {
  if (client.status === 'ready') return Promise.resolve()
  return new Promise((resolve, reject) => {
    const last = () => lastConnectionError(client)
    const settle = (err?: Error) => {
      clearTimeout(timer)
      client.off('ready', onReady)
      client.off('end', onEnd)
      if (err) reject(err)
      else resolve()
    }
    const onReady = () => settle()
    const onEnd = () => settle(last() ?? new Error('Connection is closed.'))
    const timer = setTimeout(() => settle(new Error(`no connection within ${timeoutMs} ms`)), timeoutMs)
    client.once('ready', onReady)
    client.once('end', onEnd)
    if (client.status === 'end') onEnd()
    else if (client.status === 'wait') client.connect().catch(() => undefined) // lazyConnect: as BullMQ, connect now
  })
}
