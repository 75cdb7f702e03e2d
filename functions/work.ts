/**
 * The example worker function (echomq/lambda): started by the reaper when jobs of WORKER_QUEUE wait
 * (serverless.yml params workerQueue, workerMaxConcurrency, workerJobsPerInvocation), it runs them until the
 * queue is drained or its time runs out. Replace the processor with your own; the rest stays as it is.
 */
import { createWorkerHandler } from '../lib/lambda/index.js'

export const handler = createWorkerHandler(
  process.env.WORKER_QUEUE || 'jobs',
  async (job) => {
    console.log(JSON.stringify({ level: 'INFO', message: 'job', id: job.id, name: job.name }))
    return { ok: true }
  },
  { prefix: process.env.PREFIX || 'emq', concurrency: Number(process.env.WORKER_CONCURRENCY || 10) },
)
