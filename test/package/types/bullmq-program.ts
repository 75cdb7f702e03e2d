/**
 * A BullMQ 6.7 program, written from BullMQ's documentation: a producer, a worker with type parameters,
 * the events of both, QueueEvents and a job scheduler. Only the import names EchoMQ; test/package/types.test.ts
 * type-checks it against EchoMQ and, with the import changed back to 'bullmq', against BullMQ 6.7, both
 * with `strict` and `exactOptionalPropertyTypes`. It is never run.
 */
import { type ConnectionOptions, Job, type JobsOptions, Queue, QueueEvents, Worker } from '../../../lib/index.js'

interface EmailData {
  to: string
  subject: string
}
interface EmailResult {
  messageId: string
}
type EmailName = 'welcome' | 'digest'

const connection: ConnectionOptions = { host: 'redis.internal', port: 6379, maxRetriesPerRequest: null }

const defaultJobOptions: JobsOptions = {
  attempts: 3,
  backoff: { type: 'exponential', delay: 1_000 },
  removeOnComplete: { age: 3_600 },
  removeOnFail: 1_000,
}

export async function producer(): Promise<void> {
  // direct: a BullMQ program as written, type-checked against the package
  const queue = new Queue<EmailData, EmailResult, EmailName>('emails', { connection, defaultJobOptions })
  queue.on('waiting', (job) => console.log('queued', job.id, job.data.to))
  queue.on('error', (err: Error) => console.error(err.message))
  queue.on('removed', (jobId: string) => console.log('removed', jobId))

  const job: Job<EmailData, EmailResult, EmailName> = await queue.add(
    'welcome',
    { to: 'ada@example.com', subject: 'Hello' },
    { jobId: 'welcome/ada@example.com', priority: 1, delay: 1_000 },
  )
  // @ts-expect-error: a job name outside EmailName
  await queue.add('reminder', { to: 'ada@example.com', subject: 'Hello' })
  // @ts-expect-error: data of another shape
  await queue.add('welcome', { to: 42 })
  const attempts: number | undefined = job.opts.attempts
  console.log(job.id, job.name, job.timestamp, attempts, job.opts.removeOnComplete)

  await queue.addBulk([
    { name: 'digest', data: { to: 'a@example.com', subject: 'Daily' }, opts: { jobId: 'acme:digest:42' } },
    { name: 'digest', data: { to: 'b@example.com', subject: 'Daily' } },
  ])
  const found = await queue.getJob('welcome/ada@example.com')
  if (found) console.log(found.data.subject, await found.getState())
  const created = await Job.create<EmailData, EmailResult, EmailName>(
    queue,
    'welcome',
    { to: 'c@example.com', subject: 'Hi' },
    { attempts: 2 },
  )
  await created.clearLogs(10)
  console.log(created.data.to, JSON.stringify(created))
  const counts = await queue.getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized')
  console.log(counts.waiting, await queue.getWaitingCount(), await queue.count())
  const prioritized: Job<EmailData, EmailResult, EmailName>[] = await queue.getPrioritized(0, 9)
  const waiting = await queue.getWaiting()
  console.log(prioritized.length, waiting.length, (await queue.getJobs(['failed'], 0, 9, true)).length)
  const metrics = await queue.getMetrics('completed', 0, 59)
  console.log(metrics.meta.count, metrics.meta.prevTS, metrics.data.length, metrics.count)
  const removed: number = await queue.remove('acme:digest:42')
  console.log(removed === 1)

  await queue.upsertJobScheduler(
    'digest',
    { every: 60_000 },
    { name: 'digest', data: { to: 'team@example.com', subject: 'Hourly' }, opts: { attempts: 2 } },
  )
  await queue.upsertJobScheduler('welcome', { pattern: '0 9 * * *', tz: 'Europe/London' })
  console.log((await queue.getJobSchedulers()).length)
  await queue.pause()
  const paused: boolean = await queue.isPaused()
  await queue.resume()
  console.log(paused, await queue.clean(60_000, 100, 'completed'))
  await queue.close()
}

export function consumer(): Worker<EmailData, EmailResult, EmailName> {
  // direct: a BullMQ program as written, type-checked against the package
  const worker = new Worker<EmailData, EmailResult, EmailName>(
    'emails',
    async (job) => {
      await job.updateProgress(50)
      await job.log(`sending to ${job.data.to}`)
      if (job.name === 'digest') return { messageId: `digest-${job.id}` }
      return { messageId: `welcome-${job.attemptsMade}` }
    },
    { connection, concurrency: 5, limiter: { max: 10, duration: 1_000 } },
  )
  worker.on('active', (job) => console.log('started', job.id))
  worker.on('progress', (job, progress) => console.log(job.id, progress))
  worker.on('completed', (job, result) => console.log(job.data.to, result.messageId))
  // @ts-expect-error: the result has no such field
  worker.on('completed', (_job, result) => console.log(result.missing))
  // @ts-expect-error: no such event
  worker.on('finished', () => undefined)
  worker.on('failed', (job, err) => console.error(job?.id, err.message, job?.attemptsMade))
  worker.on('error', (err) => console.error(err))
  worker.on('drained', () => console.log('idle'))
  return worker
}

export async function untypedWorker(): Promise<void> {
  // No type parameters: job.data is any, as in BullMQ.
  // direct: a BullMQ program as written, type-checked against the package
  const worker = new Worker(
    'reports',
    async (job) => {
      const rows: number = job.data.rows.length
      return { rows }
    },
    { connection },
  )
  worker.on('completed', (job: Job) => console.log(job.returnvalue))
  await worker.close()
}

export async function events(job: Job<EmailData, EmailResult, EmailName>): Promise<string> {
  const queueEvents = new QueueEvents('emails', { connection })
  queueEvents.on('completed', ({ jobId, returnvalue }) => console.log(jobId, returnvalue))
  queueEvents.on('failed', ({ jobId, failedReason }) => console.error(jobId, failedReason))
  queueEvents.on('progress', ({ jobId, data }) => console.log(jobId, data))
  queueEvents.on('waiting', ({ jobId }) => console.log(jobId))
  await queueEvents.waitUntilReady()
  const result = await job.waitUntilFinished(queueEvents, 30_000)
  await queueEvents.close()
  return result.messageId
}
