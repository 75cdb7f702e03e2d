/**
 * `echomq/lambda`: a queue's jobs run by cloud functions started when there is work (docs/serverless-workers.md).
 * `createWorkerHandler(queue, processor, options?)` is the function's handler; the reaper starts such
 * functions when jobs wait (WORKER_FUNCTIONS, lib/reaper/scaling.ts). No AWS package is loaded unless the
 * Redis URL comes from SSM (REDIS_URL_PARAMETER): then @aws-lambda-powertools/parameters and
 * @aws-sdk/client-ssm, optional peers of echomq, are.
 */
export type { Job } from '../job.js'
export type { Processor } from '../worker.js'
export { parseWorkerEvent, type WorkerEvent } from './event.js'
export {
  createWorkerHandler,
  type StopReason,
  type WorkerContext,
  type WorkerHandler,
  type WorkerInvocationResult,
} from './handler.js'
export { RESERVE_MS_DEFAULT, type WorkerHandlerOptions } from './options.js'
