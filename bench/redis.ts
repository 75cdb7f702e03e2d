/**
 * A private redis-server for the benchmark: a free port, a temp dir, no persistence, noeviction. It never
 * touches another Redis. `meter` is the measuring connection (named `bench-meter`, so its own commands can
 * be told apart); `connect(name)` opens named clients that stop() closes.
 */
import { Redis } from 'ioredis'
import { startLocalRedis } from '../cli/support/local-redis.js'

export const METER_NAME = 'bench-meter'

export interface BenchRedis {
  host: string
  port: number
  version: string
  meter: Redis
  connect(name: string): Redis
  stop(): Promise<void>
}

export async function startRedis(): Promise<BenchRedis> {
  const host = '127.0.0.1'
  const server = await startLocalRedis([
    '--maxmemory-policy',
    'noeviction',
    '--slowlog-log-slower-than',
    '-1',
    '--slowlog-max-len',
    '100000',
  ])
  const clients: Redis[] = []
  const connect = (name: string) => {
    const c = new Redis({ host, port: server.port, connectionName: name, maxRetriesPerRequest: null, retryStrategy: () => 100 })
    c.on('error', () => undefined)
    clients.push(c)
    return c
  }
  const meter = connect(METER_NAME)
  const version = /redis_version:(\S+)/.exec(await meter.info('server'))?.[1] ?? '?'
  let stopped = false
  return {
    host,
    port: server.port,
    version,
    meter,
    connect,
    async stop() {
      if (stopped) return
      stopped = true
      for (const c of clients) c.disconnect()
      await server.stop()
    },
  }
}
