/**
 * US dollars per million jobs from the cost bench's per-job figures. The prices and billing rules, as
 * published (us-east-1, read 2026-12):
 * - ElastiCache Serverless for Redis OSS: $0.0034 per million ECPUs. "Simple reads and writes require 1
 *   ECPU for each kilobyte (KB) of data transferred"; commands that take more vCPU time consume ECPUs in
 *   proportion (https://aws.amazon.com/elasticache/pricing/). AWS does not publish the vCPU time of one
 *   ECPU: this model takes a simple command's Redis CPU as one ECPU (a GET or SET of under 1 KB, measured
 *   with redis-benchmark on the machine and in the run that measured the jobs: bench/cost.ts
 *   simpleCommandUs; SIMPLE_COMMAND_US where it could not be), and charges each job the larger of its
 *   kilobytes transferred and its CPU in such units, and at least one ECPU per command.
 * - Upstash Redis pay-as-you-go: $0.20 per 100,000 commands (https://upstash.com/pricing/redis); a script
 *   call counts as one command.
 * Storage (GB-hours) is left out: both libraries keep a job's hash for as long as retention says.
 */
export const ELASTICACHE_USD_PER_MILLION_ECPU = 0.0034
export const UPSTASH_USD_PER_COMMAND = 0.2 / 100_000
/**
 * Redis CPU of one simple command under 1 KB (redis-benchmark -t get,set -P 1 -n 200000), as measured on the
 * development machine of 2026-12-02: the unit when a run cannot measure its own (no redis-benchmark).
 */
export const SIMPLE_COMMAND_US = 3

export interface PerJob {
  redisCpuUs: number
  bytes: number
  commands: number
}

/** `simpleUs`: a simple command's Redis CPU (µs) on the machine that measured `job`. */
export function ecpusPerJob({ redisCpuUs, bytes, commands }: PerJob, simpleUs = SIMPLE_COMMAND_US): number {
  return Math.max(commands, bytes / 1024, redisCpuUs / simpleUs)
}

export function prices(job: PerJob, simpleUs = SIMPLE_COMMAND_US): { elasticache: number; upstash: number } {
  return {
    elasticache: (ecpusPerJob(job, simpleUs) * 1e6 * ELASTICACHE_USD_PER_MILLION_ECPU) / 1e6,
    upstash: job.commands * 1e6 * UPSTASH_USD_PER_COMMAND,
  }
}

/**
 * AWS Lambda, us-east-1, arm64 (https://aws.amazon.com/lambda/pricing/): $0.20 per million requests and
 * $0.0000133334 per GB-second; Amazon SQS standard (https://aws.amazon.com/sqs/pricing/): $0.40 per million
 * requests. Free tiers left out.
 */
export const LAMBDA_USD_PER_REQUEST = 0.2 / 1e6
export const LAMBDA_USD_PER_GB_SECOND = 0.0000133334
export const SQS_USD_PER_REQUEST = 0.4 / 1e6
/** The worker function's memory in serverless.yml (functions.work.memorySize). */
export const WORKER_FUNCTION_GB = 0.5
/**
 * SQS requests per message with a Lambda event source mapping at batch size 10: a SendMessage, and a
 * share of the batched ReceiveMessage and DeleteMessageBatch plus the mapping's empty long polls (AWS bills
 * each; 1.2 is the estimate docs/serverless-workers.md uses, not a measurement).
 */
export const SQS_REQUESTS_PER_MESSAGE = 1.2
export const SQS_BATCH = 10

export interface PathDollars {
  requests: number
  gbSeconds: number
  lambda: number
  queue: number
}

/** A million jobs run by EchoMQ's worker functions: Lambda requests and GB-seconds as measured, Redis on Upstash. */
export function functionPath(job: PerJob & { invocations: number; functionMs: number }): PathDollars {
  const requests = job.invocations * 1e6
  const gbSeconds = ((job.functionMs * 1e6) / 1000) * WORKER_FUNCTION_GB
  return {
    requests,
    gbSeconds,
    lambda: requests * LAMBDA_USD_PER_REQUEST + gbSeconds * LAMBDA_USD_PER_GB_SECOND,
    queue: prices(job).upstash,
  }
}

/**
 * The same million jobs through SQS + Lambda: one invocation per batch of SQS_BATCH, and (an assumption: not
 * measured here) the same function time per job as EchoMQ's, so only requests and the queue's bill differ.
 */
export function sqsLambdaPath(functionMsPerJob: number): PathDollars {
  const requests = 1e6 / SQS_BATCH
  const gbSeconds = ((functionMsPerJob * 1e6) / 1000) * WORKER_FUNCTION_GB
  return {
    requests,
    gbSeconds,
    lambda: requests * LAMBDA_USD_PER_REQUEST + gbSeconds * LAMBDA_USD_PER_GB_SECOND,
    queue: 1e6 * SQS_REQUESTS_PER_MESSAGE * SQS_USD_PER_REQUEST,
  }
}
