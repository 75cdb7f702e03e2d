import { Redis } from 'ioredis'
import { startLocalRedis } from '../cli/support/local-redis.js'
import { Queue, Worker } from '../lib/index.js'

const srv = await startLocalRedis()
const r = new Redis(srv.port)
const stats = async () => {
  const info = await r.info('commandstats')
  const out: Record<string, { calls: number; usec: number }> = {}
  for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) out[m[1]] = { calls: +m[2], usec: +m[3] }
  return out
}
const N = 5000
for (const prio of [false, true]) {
  await r.flushall()
  const q = new Queue('p', { connection: srv.url })
  await q.addBulk(Array.from({ length: N }, (_, i) => ({ name: 'j', data: { i }, opts: prio ? { priority: 1 + (i % 10) } : {} })))
  await r.config('RESETSTAT')
  let done = 0
  const t0 = performance.now()
  const finished = new Promise<void>((res) => {
    const w = new Worker('p', async () => null, { connection: srv.url, concurrency: 50 })
    w.on('completed', () => {
      if (++done === N) {
        void w.close().then(() => res())
      }
    })
  })
  await finished
  const ms = performance.now() - t0
  const s = await stats()
  const rows = Object.entries(s)
    .filter(([n]) => !['info', 'config'].includes(n))
    .sort((a, b) => b[1].usec - a[1].usec)
    .slice(0, 14)
  console.log(
    prio ? 'PRIORITY' : 'PLAIN',
    Math.round((N / ms) * 1000),
    'jobs/s',
    rows.map(([n, v]) => `${n}:${(v.calls / N).toFixed(2)}/${(v.usec / N).toFixed(1)}us`).join(' '),
  )
  await q.close()
}
r.disconnect()
await srv.stop()
