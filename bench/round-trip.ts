/**
 * `npx tsx bench/round-trip.ts [--calls N] [--rounds R]`
 *
 * What a round trip costs Redis, against what the call it carries costs: Redis CPU (INFO cpu) per call for a
 * PING and for a worker's finish call with nothing to do (finish-16.lua: its fixed part, paid once per call
 * however many runs it ends), each sent alone (a write, and so a wake-up of Redis, per call) and 100 to a
 * write (pipelined), on a fresh redis-server. Where a lone PING costs several times a pipelined one, the
 * wake-ups are what a path with small batches pays for (docs/cost.md: the worker function at concurrency 10).
 */
import { Redis } from 'ioredis'
import { startLocalRedis } from '../cli/support/local-redis.js'
import { finishRuns } from '../lib/redis/finishing.js'
import { queueKeys } from '../lib/redis/keys.js'
import { table } from './format.js'
import { redisCpuUs } from './meter.js'
import { median } from './util.js'

const args = process.argv.slice(2)
const opt = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? Number(args[i + 1]) : fallback
}
const calls = opt('calls', 10_000)
const rounds = opt('rounds', 3)
const PER_WRITE = 100

const server = await startLocalRedis()
const client = new Redis(server.port, '127.0.0.1')
// Commands made in one tick go in one write (ioredis's auto-pipelining).
const batching = new Redis(server.port, '127.0.0.1', { enableAutoPipelining: true })
const meter = new Redis(server.port, '127.0.0.1')
const keys = queueKeys('emq', 'round-trip')
const kinds = {
  ping: (c: Redis) => c.ping(),
  'empty finish': (c: Redis) => finishRuns(c, keys, []),
} as const

/** Redis CPU µs per call of `kind`, `perWrite` calls sent in one write each time. */
async function perCall(kind: keyof typeof kinds, perWrite: number): Promise<number> {
  const c = perWrite === 1 ? client : batching
  const before = await redisCpuUs(meter)
  for (let i = 0; i < calls; i += perWrite) await Promise.all(Array.from({ length: perWrite }, () => kinds[kind](c)))
  return ((await redisCpuUs(meter)) - before) / calls
}

try {
  await kinds['empty finish'](client) // the script loaded
  const rows: string[][] = []
  for (const kind of Object.keys(kinds) as (keyof typeof kinds)[]) {
    const alone: number[] = []
    const together: number[] = []
    for (let r = 0; r < rounds; r++) {
      alone.push(await perCall(kind, 1))
      together.push(await perCall(kind, PER_WRITE))
    }
    const [a, t] = [median(alone), median(together)]
    rows.push([kind, a.toFixed(1), t.toFixed(1), (a - t).toFixed(1)])
  }
  console.log(`Redis CPU µs per call, median of ${rounds} rounds of ${calls} calls (a fresh redis-server)`)
  console.log(table(['call', 'alone (a write each)', `${PER_WRITE} to a write`, 'a wake-up costs'], rows))
} finally {
  await client.quit()
  await batching.quit()
  await meter.quit()
  await server.stop()
}
