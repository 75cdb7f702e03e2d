/**
 * A private redis-server on a free port in a temporary directory: the local default for `echomq demo`
 * and `echomq race`, and what the tests and benchmarks run against. It never touches another Redis.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { CliError } from '../errors.js'

export interface LocalRedis {
  port: number
  url: string
  dir: string
  process: ChildProcess
  stop(): Promise<void>
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/**
 * Spawns redis-server on 127.0.0.1:`port` (0: no plain port) with its files in `dir`, without persistence
 * unless `args` ask for it (a later flag wins). Every launcher in the tests and benchmarks starts here.
 */
export function spawnRedisServer(port: number, dir: string, args: string[] = []): ChildProcess {
  const base = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]
  return spawn('redis-server', [...base, ...args], { stdio: 'ignore' })
}

/** Starts redis-server (no persistence unless `extraArgs` ask for it) and waits until it answers PING. */
export async function startLocalRedis(extraArgs: string[] = []): Promise<LocalRedis> {
  if (spawnSync('redis-server', ['--version']).error) {
    throw new CliError(
      'redis-server is not on PATH. Install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) ' +
        'or set REDIS_URL to a Redis you have.',
    )
  }
  const port = await freePort()
  const dir = mkdtempSync(path.join(tmpdir(), 'echomq-redis-'))
  const child = spawnRedisServer(port, dir, extraArgs)
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    rmSync(dir, { recursive: true, force: true })
  }
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  probe.on('error', () => undefined)
  const deadline = performance.now() + 10_000
  try {
    for (;;) {
      try {
        await probe.connect()
        if ((await probe.ping()) === 'PONG') break
      } catch {
        if (performance.now() > deadline || child.exitCode !== null) throw new CliError(`redis-server did not start on port ${port}`)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }
  } catch (err) {
    await stop()
    throw err
  } finally {
    probe.disconnect()
  }
  return { port, url: `redis://127.0.0.1:${port}`, dir, process: child, stop }
}
