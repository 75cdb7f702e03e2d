/**
 * The reaper's handler invoked in this process against the test's Redis, as a container of its own
 * (its own connection, closed after the invocation), its metrics caught at a local CloudWatch endpoint by
 * the real SDK client and its log lines captured. The endpoint is started for the file (the region,
 * made-up credentials and its URL stubbed in the environment), emptied and made healthy again before each
 * test; the logs are captured afresh before each test and released after it.
 */
import { afterAll, beforeAll, beforeEach, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { type CloudWatchEndpoint, startCloudWatchEndpoint } from './cloudwatch-endpoint.js'
import { stubLocalAws } from './local-aws.js'
import { type CapturedLogs, useCapturedLogs } from './log-lines.js'
import type { TestRedis } from './redis-server.js'

type Summary = Awaited<ReturnType<ReturnType<typeof createHandler>>>

export interface ReaperInvocations {
  readonly endpoint: CloudWatchEndpoint
  /** What the current test's invocations logged. */
  readonly logs: CapturedLogs
  /** The Lambda context every invocation gets. */
  readonly context: { getRemainingTimeInMillis(): number } & Record<string, unknown>
  /** The environment every invocation gets (for a handler made by the test, or a child process). */
  env(): Record<string, string>
  /** One invocation with the file's environment, over `env`. */
  invoke(env?: Record<string, string>): Promise<Summary>
}

export interface InvocationOptions {
  /** The environment of every invocation (REDIS_URL is the test Redis's, SWEEP_GRACE_MS 0 unless given). */
  env?: Record<string, string>
  /** What the Lambda context holds beside getRemainingTimeInMillis (50 s). */
  context?: Record<string, string>
}

export function useReaperInvocations(redis: TestRedis, options: InvocationOptions = {}): ReaperInvocations {
  let endpoint: CloudWatchEndpoint | undefined
  beforeAll(async () => {
    endpoint = await startCloudWatchEndpoint()
    stubLocalAws({ AWS_ENDPOINT_URL_CLOUDWATCH: endpoint.url })
  })
  afterAll(async () => {
    vi.unstubAllEnvs()
    await endpoint?.close()
  })
  beforeEach(() => {
    if (!endpoint) return
    endpoint.requests.length = 0
    endpoint.failWith(undefined)
  })
  const logs = useCapturedLogs()
  const context = { getRemainingTimeInMillis: () => 50_000, ...options.context }
  const base = () => ({ REDIS_URL: redis.url, SWEEP_GRACE_MS: '0', ...options.env })
  return {
    context,
    env: base,
    get endpoint(): CloudWatchEndpoint {
      if (!endpoint) throw new Error('the CloudWatch endpoint is started before the tests')
      return endpoint
    },
    logs,
    async invoke(env = {}) {
      const handler = createHandler({ ...base(), ...env })
      try {
        return await handler({}, context)
      } finally {
        await handler.close()
      }
    },
  }
}
