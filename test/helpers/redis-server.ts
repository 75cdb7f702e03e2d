/** Starts a private redis-server on a free port for one test file, so tests never touch a shared one. */
import type { ChildProcess } from 'node:child_process'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, beforeEach } from 'vitest'
import { freePort, spawnRedisServer, startLocalRedis } from '../../cli/support/local-redis.js'
import { waitFor } from './wait.js'

export interface TestRedis {
  port: number
  url: string
  dir: string
  process: ChildProcess
  /** A client that the helper closes in stop(). */
  client: Redis
  /** Another client, closed in stop(). */
  connect(): Redis
  stop(): Promise<void>
}

/** The local redis-server the CLI ships (cli/support/local-redis.ts), re-exported: tests import it from here. */
export { freePort, spawnRedisServer }

export async function startRedis(extraArgs: string[] = []): Promise<TestRedis> {
  const server = await startLocalRedis(extraArgs)
  const clients: Redis[] = []
  const connect = () => {
    const c = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
    c.on('error', () => undefined)
    clients.push(c)
    return c
  }
  const client = connect()
  await waitFor(async () => (await client.ping()) === 'PONG', { timeoutMs: 10_000, what: `redis-server on port ${server.port}` })
  return {
    port: server.port,
    url: server.url,
    dir: server.dir,
    process: server.process,
    client,
    connect,
    async stop() {
      for (const c of clients) c.disconnect()
      await server.stop()
    },
  }
}

/**
 * One private redis-server for a test file, started before its tests, flushed before each, stopped after.
 * The returned object is filled in by the beforeAll hook.
 */
export function useRedis(extraArgs: string[] = []): TestRedis {
  const holder = {} as TestRedis
  beforeAll(async () => {
    Object.assign(holder, await startRedis(extraArgs))
  })
  afterAll(async () => {
    await holder.stop?.()
  })
  beforeEach(async () => {
    await holder.client.flushall()
  })
  return holder
}
