import { Redis } from 'ioredis'
import { startLocalRedis } from '../../cli/support/local-redis.js'
import { finishRuns } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
const server = await startLocalRedis([])
const r = new Redis({ host: '127.0.0.1', port: server.port })
const keys = queueKeys('emq', 'q')
const cpu = async () => { const t = await r.info('cpu'); const g = (n: string) => Number(new RegExp(`${n}:([\\d.]+)`).exec(t)![1]); return g('used_cpu_user') + g('used_cpu_sys') }
await finishRuns(r as never, keys, [])
for (let round = 0; round < 3; round++) {
  const N = 3000
  const c0 = await cpu()
  const ps = []
  for (let i = 0; i < N; i++) ps.push(finishRuns(r as never, keys, []))
  await Promise.all(ps)
  const c1 = await cpu()
  console.log('empty finish call', ((c1 - c0) * 1e6 / N).toFixed(2), 'us')
}
await r.quit(); process.exit(0)
