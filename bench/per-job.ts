/**
 * `npx tsx bench/per-job.ts [concurrency=1] [jobs=10000] [emq,bull] [rounds=1]`
 *
 * What one job costs, by measures a loaded machine does not blur: N no-op jobs pre-added (addBulk, not
 * measured), then one Worker at the given concurrency runs them, each library with its defaults, each run
 * on its own fresh redis-server. Printed per job: commands SENT by name (every ioredis sendCommand of this
 * process), the server's bytes in and out (INFO stats), the commands Redis ran with their usec (INFO
 * commandstats: script-inner commands included, so a script's usec holds theirs), Redis and client CPU, and
 * jobs/s (timings only: on a shared machine they vary by a third). With BENCH_REDIS_PORT the runs use
 * that server instead (one started under `valgrind --tool=callgrind --instr-atstart=no`, say: the run then
 * turns callgrind's instrumentation on and off around the worker when BENCH_CALLGRIND_PID names it).
 */
import { execFileSync } from 'node:child_process'
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import { Redis } from 'ioredis'
import { startLocalRedis } from '../cli/support/local-redis.js'
import { Queue, Worker } from '../lib/index.js'

const sent: Record<string, number> = {}
let counting = false
const proto = Redis.prototype as unknown as { sendCommand: (...args: unknown[]) => unknown }
const original = proto.sendCommand
proto.sendCommand = function (this: unknown, ...args: unknown[]) {
  if (counting) {
    const name = (args[0] as { name: string }).name
    sent[name] = (sent[name] ?? 0) + 1
  }
  return original.apply(this, args)
}

async function server(meter: Redis) {
  const info = `${await meter.info('cpu')}\n${await meter.info('stats')}`
  const num = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN)
  return { cpuUs: (num('used_cpu_user') + num('used_cpu_sys')) * 1e6, in: num('total_net_input_bytes'), out: num('total_net_output_bytes') }
}

async function commandStats(meter: Redis): Promise<[string, number, number][]> {
  const rows: [string, number, number][] = []
  for (const line of (await meter.info('commandstats')).split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim())
    if (m?.[1] && !/^(info|config)/.test(m[1])) rows.push([m[1], Number(m[2]), Number(m[3])])
  }
  return rows.sort((a, b) => b[2] - a[2])
}

function callgrind(on: boolean): void {
  const pid = process.env.BENCH_CALLGRIND_PID
  if (pid) execFileSync('callgrind_control', ['-i', on ? 'on' : 'off', pid], { stdio: 'ignore' })
}

async function runOnce(lib: 'emq' | 'bull', concurrency: number, n: number): Promise<void> {
  const external = process.env.BENCH_REDIS_PORT
  const local = external ? undefined : await startLocalRedis(['--maxmemory-policy', 'noeviction'])
  const port = external ? Number(external) : (local?.port as number)
  const meter = new Redis({ port })
  const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null }
  const jobs = Array.from({ length: n }, (_, i) => ({ name: 'job', data: { i } }))
  try {
    const queue = lib === 'emq' ? new Queue('per-job', { connection }) : new BullQueue('per-job', { connection })
    for (let i = 0; i < n; i += 1000) await queue.addBulk(jobs.slice(i, i + 1000))
    await queue.close()
    await meter.config('RESETSTAT')
    for (const k of Object.keys(sent)) delete sent[k]
    const before = await server(meter)
    callgrind(true)
    counting = true
    const t0 = performance.now()
    const cpu0 = process.cpuUsage()
    let done = 0
    const onDone = () => void done++
    let worker: { close(): Promise<void> }
    if (lib === 'emq') {
      const w = new Worker('per-job', async () => null, { connection, concurrency })
      w.on('completed', onDone)
      w.on('error', () => undefined)
      worker = w
    } else {
      const w = new BullWorker('per-job', async () => null, { connection, concurrency })
      w.on('completed', onDone)
      w.on('error', () => undefined)
      worker = w
    }
    const deadline = performance.now() + 300_000
    while (done < n && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 1))
    const ms = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    counting = false
    callgrind(false)
    const after = await server(meter)
    const stats = await commandStats(meter)
    await worker.close()
    const per = (x: number, digits = 2) => (x / n).toFixed(digits)
    const head = `${lib} c=${concurrency} n=${n}: ${done < n ? `TIMED OUT at ${done}; ` : ''}${Math.round((n / ms) * 1000)} jobs/s`
    const cpuText = `Redis CPU ${per(after.cpuUs - before.cpuUs, 1)} µs/job, client CPU ${per(cpu.user + cpu.system, 1)} µs/job`
    console.log(`${head}; ${cpuText}; bytes in ${per(after.in - before.in, 1)}, out ${per(after.out - before.out, 1)} per job`)
    console.log(
      `  sent per job: ${Object.entries(sent)
        .map(([name, count]) => `${name} ${per(count, 4)}`)
        .join(', ')}`,
    )
    console.log(
      `  Redis ran per job (calls x, usec): ${stats.map(([name, calls, usec]) => `${name} ${per(calls)}x ${per(usec)}`).join(', ')}`,
    )
  } finally {
    meter.disconnect()
    await local?.stop()
  }
}

const [concurrency = '1', jobs = '10000', libs = 'emq,bull', rounds = '1'] = process.argv.slice(2)
for (let round = 0; round < Number(rounds); round++)
  for (const lib of libs.split(',')) await runOnce(lib as 'emq' | 'bull', Number(concurrency), Number(jobs))
process.exit(0)
