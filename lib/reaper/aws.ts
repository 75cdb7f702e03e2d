/**
 * What the reaper's AWS clients (CloudWatch for metrics, SSM for the Redis URL) share: bounded timeouts and
 * a readable account of a failed call.
 *
 * Bounded: a function in a VPC with no route to an AWS API would otherwise wait for the SDK's retries on
 * every invocation. Each client makes at most two attempts, each connection attempt gives up after
 * AWS_CONNECT_TIMEOUT_MS, and every call carries an overall deadline (`deadline(ms)`) that aborts it.
 *
 * Described: `describeAwsError` keeps the error's name, HTTP status and request id (from the SDK's
 * `$metadata`), what a support ticket or a CloudTrail search needs, and never the request itself.
 */

/** A connection that is not up by then will not come up: AWS endpoints answer the handshake in milliseconds. */
const AWS_CONNECT_TIMEOUT_MS = 1_000

/** Constructor options for an AWS SDK v3 client: two attempts, a connect timeout, a request timeout. */
export function boundedClientOptions(requestTimeoutMs: number) {
  return {
    maxAttempts: 2,
    requestHandler: { connectionTimeout: AWS_CONNECT_TIMEOUT_MS, requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true },
  }
}

/** The overall deadline of one call, retries included: pass as `client.send(command, deadline(ms))`. */
export function deadline(ms: number): { abortSignal: AbortSignal } {
  return { abortSignal: AbortSignal.timeout(ms) }
}

export interface AwsErrorDescription {
  /** The service's error code (`AccessDeniedException`, `ParameterNotFound`) or the client's (`AbortError`, `TimeoutError`). */
  errorName: string
  error: string
  httpStatus?: number
  requestId?: string
}

export function describeAwsError(err: unknown): AwsErrorDescription {
  const e = (typeof err === 'object' && err !== null ? err : { message: String(err) }) as {
    name?: unknown
    message?: unknown
    $metadata?: { httpStatusCode?: number; requestId?: string }
  }
  const meta = e.$metadata ?? {}
  return {
    errorName: typeof e.name === 'string' ? e.name : 'Error',
    error: typeof e.message === 'string' && e.message !== '' ? e.message : String(err),
    ...(meta.httpStatusCode === undefined ? {} : { httpStatus: meta.httpStatusCode }),
    ...(meta.requestId === undefined ? {} : { requestId: meta.requestId }),
  }
}

/** True when the call ran out of time (our deadline, or the SDK's connect or request timeout). */
export function isTimeout(err: unknown): boolean {
  const name = (err as { name?: unknown } | null)?.name
  return name === 'AbortError' || name === 'TimeoutError'
}
