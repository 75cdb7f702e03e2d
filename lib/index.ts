/**
 * `echomq`: leases, batched heartbeats and an atomic two-phase stalled-job sweep for Redis job queues.
 * What a producer or a worker process imports, and all it loads: ioredis and cron-parser, no dashboard
 * (`echomq/dashboard`, lib/ui/index.ts) and no reaper (`echomq/reaper`, lib/reaper/index.ts).
 */

export {
  DelayedError,
  EchoMQError,
  type EchoMQErrorCode,
  RateLimitError,
  UnrecoverableError,
  WaitingChildrenError,
} from './errors.js'
export type { Dependencies, DependenciesOptions } from './flows/job-flows.js'
export {
  type FlowChildJob,
  type FlowJob,
  type FlowOpts,
  FlowProducer,
  type FlowProducerOptions,
  type JobNode,
} from './flows/producer.js'
export { Job, type JobFields, type JobState } from './job.js'
export type { JobOptions, JobOptions as JobsOptions } from './job-options.js'
export type { JobOpts } from './job-opts.js'
export type { JobProgress, QueueEventsListener, QueueListener, WorkerListener } from './listeners.js'
export * from './options.js'
export { MetricsTime } from './queue/metrics.js'
export {
  type BulkJob,
  type JobScheduler,
  type JobTemplate,
  type JobType,
  type Metrics,
  Queue,
  type QueueCounts,
  type QueueOptions,
  type RepeatOptions,
} from './queue.js'
export { QueueEvents, type QueueEventsOptions } from './queue-events.js'
export { type Connection, openConnection, redactUrl } from './redis/connection.js'
export type { ConnectionOptions } from './redis/connection-options.js'
export { type QueueKeys, queueKeys, registryKey } from './redis/keys.js'
export { registeredQueues } from './registry.js'
export { type SweepOptions, type SweepResult, sweep } from './sweep.js'
export { type Processor, Worker, type WorkerOptions } from './worker.js'
