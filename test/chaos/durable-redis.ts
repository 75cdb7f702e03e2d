/**
 * A redis-server with an append-only file fsynced on every write, on a fixed free port and a fixed --dir,
 * so it can be stopped (SHUTDOWN, SIGTERM or SIGKILL) and started again with the same data; or, with
 * `persist: false`, without persistence, so it comes back empty (a cache Redis restarted).
 */
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { freePort, spawnRedisServer } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

export type StopHow = 'SHUTDOWN' | 'SIGTERM' | 'SIGKILL'

export interface DurableRedis {
  port: number
  url: string
  dir: string
  /** Starts (again) on the same port and dir; resolves once it answers PING. */
  start(): Promise<void>
  /** Stops it and resolves once the process has exited. */
  stop(how: StopHow): Promise<void>
  /** Stops it for good and removes its dir. */
  destroy(): Promise<void>
  readonly running: boolean
}

async function ping(port: number): Promise<boolean> {
  const c = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  })
  c.on('error', () => undefined)
  try {
    await c.connect()
    return (await c.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    c.disconnect()
  }
}

export async function startDurableRedis({ persist = true }: { persist?: boolean } = {}): Promise<DurableRedis> {
  const port = await freePort()
  const dir = mkdtempSync(path.join(tmpdir(), 'emq-chaos-aof-'))
  let child: ChildProcess | undefined
  const exited = (c: ChildProcess) =>
    c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => c.once('exit', () => resolve()))
  const redis: DurableRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null
    },
    async start() {
      if (redis.running) throw new Error('redis-server is already running')
      const persistence = persist ? ['--appendonly', 'yes', '--appendfsync', 'always'] : []
      child = spawnRedisServer(port, dir, [...persistence, '--maxmemory-policy', 'noeviction'])
      await waitFor(() => ping(port), { timeoutMs: 10_000, intervalMs: 20, what: `redis-server on port ${port}` })
    },
    async stop(how) {
      const c = child
      if (!c || !redis.running) return
      const gone = exited(c)
      if (how === 'SHUTDOWN') {
        const admin = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null })
        admin.on('error', () => undefined)
        // The reply never comes: the server closes the connection as it exits.
        await admin.call('SHUTDOWN').catch(() => undefined)
        admin.disconnect()
      } else c.kill(how)
      await gone
    },
    async destroy() {
      await redis.stop('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await redis.start()
  return redis
}
