/**
 * A worker process for bench/ratelimit.ts (forked with tsx, spawned by throughput.ts's spawnChild): on
 * `run` it starts one EchoMQ or BullMQ worker with a limiter and no-op jobs, recording when each job
 * started: by its own library's stamp (job.processedOn: EchoMQ's take script stamps Redis's clock, BullMQ
 * the time its client passed) and by Date.now when the processor was called (the clock every process on
 * the machine shares). On `stop` it closes the worker and reports them.
 */
import { Worker as BullWorker } from 'bullmq'
import { Worker } from '../lib/index.js'
import { type QueueTarget, watchWorker } from './util.js'

export interface LimitedRunMessage extends QueueTarget {
  type: 'run'
  concurrency: number
  max: number
  duration: number
}

export interface LimitedStoppedMessage {
  type: 'stopped'
  /** Each start: [job.processedOn, Date.now() when the processor was called]. */
  starts: [number, number][]
  errors: string[]
}

type Message = LimitedRunMessage | { type: 'stop' } | { type: 'exit' }

let worker: { close(): Promise<void> } | undefined
let stats: LimitedStoppedMessage = { type: 'stopped', starts: [], errors: [] }

const failed = (err: unknown) => stats.errors.push(err instanceof Error ? err.message : String(err))
const processor = async (job: { processedOn?: number | undefined }) => {
  stats.starts.push([job.processedOn ?? Number.NaN, Date.now()])
  return null
}

function start(m: LimitedRunMessage): void {
  stats = { type: 'stopped', starts: [], errors: [] }
  const limiter = { max: m.max, duration: m.duration }
  const w =
    m.lib === 'emq'
      ? new Worker(m.queue, processor, { connection: `redis://${m.host}:${m.port}`, prefix: m.prefix, concurrency: m.concurrency, limiter })
      : new BullWorker(m.queue, processor, {
          connection: { host: m.host, port: m.port, maxRetriesPerRequest: null },
          prefix: m.prefix,
          concurrency: m.concurrency,
          limiter,
        })
  watchWorker(w, () => undefined, failed)
  worker = w
}

process.on('message', (m: Message) => {
  if (m.type === 'run') start(m)
  else if (m.type === 'stop') {
    void (worker?.close() ?? Promise.resolve()).catch(failed).then(() => {
      worker = undefined
      process.send?.(stats)
    })
  } else if (m.type === 'exit') process.exit(0)
})
process.send?.({ type: 'ready' })
