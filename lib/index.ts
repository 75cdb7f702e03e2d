/**
 * `echomq`: leases, batched heartbeats and an atomic two-phase stalled-job sweep for Redis job queues.
 * What a producer or a worker process imports, and all it loads: ioredis and cron-parser, no dashboard
 * (`echomq/dashboard`, lib/ui/index.ts) and no reaper (`echomq/reaper`, lib/reaper/index.ts).
 */

export { DelayedError, EchoMQError, type EchoMQErrorCode, RateLimitError, UnrecoverableError } from './errors.js'
export { Job, type JobFields, type JobState } from './job.js'
export * from './options.js'
export { type BulkJob, type JobScheduler, type JobTemplate, type JobType, Queue, type QueueCounts, type RepeatOptions } from './queue.js'
export { QueueEvents, type QueueEventsOptions } from './queue-events.js'
export { type Connection, openConnection, redactUrl } from './redis/connection.js'
export { type QueueKeys, queueKeys, registryKey } from './redis/keys.js'
export { registeredQueues } from './registry.js'
export { type SweepOptions, type SweepResult, sweep } from './sweep.js'
export { type Processor, Worker, type WorkerOptions } from './worker.js'
