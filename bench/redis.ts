/**
 * A private redis-server for the benchmark: a free port, a temp dir, no persistence, noeviction. It never
 * touches another Redis. `meter` is the measuring connection (named `bench-meter`, so its own commands can
 * be told apart); `connect(name)` opens named clients that stop() closes.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'

export const METER_NAME = 'bench-meter'

export interface BenchRedis {
  host: string
  port: number
  version: string
  meter: Redis
  connect(name: string): Redis
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export async function startRedis(): Promise<BenchRedis> {
  const host = '127.0.0.1'
  const port = await freePort()
  const dir = mkdtempSync(path.join(tmpdir(), 'emq-bench-'))
  const args = ['--port', String(port), '--bind', host, '--save', '', '--appendonly', 'no', '--dir', dir,
    '--maxmemory-policy', 'noeviction', '--slowlog-log-slower-than', '-1', '--slowlog-max-len', '100000']
  const child: ChildProcess = spawn('redis-server', args, { stdio: 'ignore' })
  const clients: Redis[] = []
  const connect = (name: string) => {
    const c = new Redis({ host, port, connectionName: name, maxRetriesPerRequest: null, retryStrategy: () => 100 })
    c.on('error', () => undefined)
    clients.push(c)
    return c
  }
  const meter = connect(METER_NAME)
  const started = Date.now()
  for (;;) {
    try {
      if ((await meter.ping()) === 'PONG') break
    } catch {
      /* not up yet */
    }
    if (child.exitCode !== null || Date.now() - started > 10_000) throw new Error(`redis-server did not start on port ${port}`)
    await sleep(50)
  }
  const version = /redis_version:(\S+)/.exec(await meter.info('server'))?.[1] ?? '?'
  let stopped = false
  return {
    host,
    port,
    version,
    meter,
    connect,
    async stop() {
      if (stopped) return
      stopped = true
      for (const c of clients) c.disconnect()
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
        await exited
        clearTimeout(timer)
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
