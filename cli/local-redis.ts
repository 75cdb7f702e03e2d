/**
 * The local default for `echomq demo`: when no Redis URL is given, start a private redis-server on a free
 * port in a temporary directory, and stop it afterwards.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { CliError } from './errors.js'

export interface LocalRedis {
  url: string
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

export async function startLocalRedis(): Promise<LocalRedis> {
  if (spawnSync('redis-server', ['--version']).error) {
    throw new CliError(
      'redis-server is not on PATH. Install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) or set REDIS_URL to a Redis you have.',
    )
  }
  const port = await freePort()
  const dir = mkdtempSync(path.join(tmpdir(), 'echomq-demo-'))
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' })
  const client = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  client.on('error', () => undefined)
  const deadline = Date.now() + 5_000
  for (;;) {
    try {
      await client.connect()
      await client.ping()
      break
    } catch {
      if (Date.now() > deadline || child.exitCode !== null) throw new CliError(`redis-server did not start on port ${port}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  client.disconnect()
  return {
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGTERM')
        await exited
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
