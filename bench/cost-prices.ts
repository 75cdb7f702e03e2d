/**
 * US dollars per million jobs from the cost bench's per-job figures. The prices and billing rules, as
 * published (us-east-1, read 2026-12):
 * - ElastiCache Serverless for Redis OSS: $0.0034 per million ECPUs. "Simple reads and writes require 1
 *   ECPU for each kilobyte (KB) of data transferred"; commands that take more vCPU time consume ECPUs in
 *   proportion (https://aws.amazon.com/elasticache/pricing/). AWS does not publish the vCPU time of one
 *   ECPU: this model takes a simple command's Redis CPU on this machine (SIMPLE_COMMAND_US, a GET/SET
 *   of under 1 KB measured with redis-benchmark) as one ECPU, and charges each job the larger of its
 *   kilobytes transferred and its CPU in such units, and at least one ECPU per command.
 * - Upstash Redis pay-as-you-go: $0.20 per 100,000 commands (https://upstash.com/pricing/redis); a script
 *   call counts as one command.
 * Storage (GB-hours) is left out: both libraries keep a job's hash for as long as retention says.
 */
export const ELASTICACHE_USD_PER_MILLION_ECPU = 0.0034
export const UPSTASH_USD_PER_COMMAND = 0.2 / 100_000
/** Redis CPU of one simple command under 1 KB on this machine (redis-benchmark -t get,set -P 1 -n 200000). */
export const SIMPLE_COMMAND_US = 3

export interface PerJob {
  redisCpuUs: number
  bytes: number
  commands: number
}

export function ecpusPerJob({ redisCpuUs, bytes, commands }: PerJob): number {
  return Math.max(commands, bytes / 1024, redisCpuUs / SIMPLE_COMMAND_US)
}

export function prices(job: PerJob): { elasticache: number; upstash: number } {
  return {
    elasticache: (ecpusPerJob(job) * 1e6 * ELASTICACHE_USD_PER_MILLION_ECPU) / 1e6,
    upstash: job.commands * 1e6 * UPSTASH_USD_PER_COMMAND,
  }
}
