/** Starts a private redis-server on a free port for one test file, so tests never touch a shared one. */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, beforeEach } from 'vitest'
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

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

export async function startRedis(extraArgs: string[] = []): Promise<TestRedis> {
  const port = await freePort()
  const dir = mkdtempSync(path.join(tmpdir(), 'emq-redis-'))
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs], {
    stdio: 'ignore',
  })
  const url = `redis://127.0.0.1:${port}`
  const clients: Redis[] = []
  const connect = () => {
    const c = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
    c.on('error', () => undefined)
    clients.push(c)
    return c
  }
  const client = connect()
  await waitFor(async () => (await client.ping()) === 'PONG', { timeoutMs: 10_000, what: `redis-server on port ${port}` })
  return {
    port,
    url,
    dir,
    process: child,
    client,
    connect,
    async stop() {
      for (const c of clients) c.disconnect()
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGKILL')
        await exited
      }
      rmSync(dir, { recursive: true, force: true })
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
