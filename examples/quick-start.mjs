import { Queue, QueueEvents, Worker } from 'echomq'

// A URL, ioredis options or an ioredis client; without one, redis://127.0.0.1:6379 (BullMQ's default).
const connection = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const queue = new Queue('emails', {
  connection,
  defaultJobOptions: { attempts: 3, backoff: { type: 'exponential', delay: 1_000 } },
})
const events = new QueueEvents('emails', { connection })
await events.waitUntilReady() // listening from here on: no later event is missed

const worker = new Worker('emails', async (job) => `sent to ${job.data.to}`, { connection, concurrency: 10 })
worker.on('failed', (job, err) => console.error(job.id, err.message))

const job = await queue.add('send', { to: 'ada@example.com' })
console.log(await job.waitUntilFinished(events, 10_000)) // sent to ada@example.com
console.log(await queue.counts()) // EchoMQ's: { wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 1, failed: 0 }

await worker.close()
await events.close()
await queue.close()
