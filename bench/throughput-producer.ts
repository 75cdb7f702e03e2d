/**
 * A producer process for bench/throughput.ts (forked with tsx): on `produce` it opens an EchoMQ or BullMQ
 * Queue, waits until it answers, then adds `jobs` no-op jobs one `add` at a time with `window` calls in
 * flight, as a web server adding jobs would, and reports when its first add was sent (Date.now, the clock
 * every process on the machine shares) and the CPU it used.
 */
import { Queue as BullQueue } from 'bullmq'
import { Queue } from '../lib/index.js'
import type { QueueTarget } from './util.js'

export interface ProduceMessage extends QueueTarget {
  type: 'produce'
  jobs: number
  window: number
}

export interface ProducedMessage {
  type: 'produced'
  startedAt: number
  endedAt: number
  cpuUs: number
  errors: string[]
}

async function produce(m: ProduceMessage): Promise<ProducedMessage> {
  const queue =
    m.lib === 'emq'
      ? new Queue(m.queue, { connection: `redis://${m.host}:${m.port}`, prefix: m.prefix })
      : new BullQueue(m.queue, { connection: { host: m.host, port: m.port }, prefix: m.prefix })
  const errors: string[] = []
  try {
    await queue.waitUntilReady()
    const cpu0 = process.cpuUsage()
    const startedAt = Date.now()
    let next = 0
    await Promise.all(
      Array.from({ length: m.window }, async () => {
        while (next < m.jobs) {
          const i = next++
          await (queue as Queue).add('job', { i }).catch((err: unknown) => errors.push(String(err)))
        }
      }),
    )
    const cpu = process.cpuUsage(cpu0)
    return { type: 'produced', startedAt, endedAt: Date.now(), cpuUs: cpu.user + cpu.system, errors }
  } finally {
    await queue.close()
  }
}

process.on('message', (m: ProduceMessage | { type: 'exit' }) => {
  if (m.type === 'exit') process.exit(0)
  else void produce(m).then((r) => process.send?.(r))
})
process.send?.({ type: 'ready' })
