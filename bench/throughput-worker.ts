/**
 * A worker process for bench/throughput.ts (forked with tsx): on `run` it starts one EchoMQ or BullMQ
 * worker with no-op jobs; on `stop` it closes it and reports how many jobs it completed, when it started
 * the worker and when its last job completed (Date.now, the clock every process on the machine shares),
 * and the CPU it used meanwhile.
 */
import { Worker as BullWorker } from 'bullmq'
import { Worker } from '../lib/index.js'
import { type QueueTarget, watchWorker } from './util.js'

export interface RunMessage extends QueueTarget {
  type: 'run'
  concurrency: number
}

export interface StoppedMessage {
  type: 'stopped'
  done: number
  startedAt: number
  lastAt: number
  /** CPU this process used from `run` to `stop` (µs, user + system). */
  cpuUs: number
  errors: string[]
}

type Message = RunMessage | { type: 'stop' } | { type: 'exit' }

let worker: { close(): Promise<void> } | undefined
let stats: StoppedMessage = { type: 'stopped', done: 0, startedAt: 0, lastAt: 0, cpuUs: 0, errors: [] }
let cpuAtStart = process.cpuUsage()

const completed = () => {
  stats.done++
  stats.lastAt = Date.now()
}
const failed = (err: unknown) => stats.errors.push(err instanceof Error ? err.message : String(err))

function start(m: RunMessage): void {
  stats = { type: 'stopped', done: 0, startedAt: Date.now(), lastAt: 0, cpuUs: 0, errors: [] }
  cpuAtStart = process.cpuUsage()
  const w =
    m.lib === 'emq'
      ? new Worker(m.queue, async () => null, { connection: `redis://${m.host}:${m.port}`, prefix: m.prefix, concurrency: m.concurrency })
      : new BullWorker(m.queue, async () => null, {
          connection: { host: m.host, port: m.port, maxRetriesPerRequest: null },
          prefix: m.prefix,
          concurrency: m.concurrency,
        })
  watchWorker(w, completed, failed)
  worker = w
}

process.on('message', (m: Message) => {
  if (m.type === 'run') start(m)
  else if (m.type === 'stop') {
    void (worker?.close() ?? Promise.resolve()).catch(failed).then(() => {
      const cpu = process.cpuUsage(cpuAtStart)
      stats.cpuUs = cpu.user + cpu.system
      worker = undefined
      process.send?.(stats)
    })
  } else if (m.type === 'exit') process.exit(0)
})
process.send?.({ type: 'ready' })
