/**
 * EchoMQError: every error EchoMQ raises on purpose carries a stable `code`, so callers can branch on it
 * without parsing messages. Input errors are raised before any Redis write.
 */
export type EchoMQErrorCode =
  | 'ERR_QUEUE_NAME'
  | 'ERR_JOB_ID'
  | 'ERR_JOB_NAME'
  | 'ERR_JOB_DATA'
  | 'ERR_OPTIONS'
  | 'ERR_CONNECTION'
  | 'ERR_CONFIG'
  | 'ERR_EVENT'
  | 'ERR_LOCK_LOST'
  | 'ERR_WRONG_TYPE'
  | 'ERR_SCRIPT'
  | 'ERR_SWEEP'
  | 'ERR_CLOSED'
  | 'ERR_REDIS'

export class EchoMQError extends Error {
  readonly code: EchoMQErrorCode

  constructor(code: EchoMQErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'EchoMQError'
    this.code = code
  }
}

const CONNECTION_FAILURE = /connect|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|EPIPE|closed|timed? ?out|max retries|not writeable|NOAUTH|WRONGPASS|LOADING|CLUSTERDOWN|MASTERDOWN|READONLY/i

/** Turns a Redis reply error into an EchoMQError naming the queue; a WRONGTYPE reply means a foreign key sits under the queue's prefix. */
export function redisError(queue: string, what: string, err: unknown): EchoMQError {
  if (err instanceof EchoMQError) return err
  const message = err instanceof Error ? err.message : String(err)
  const code: EchoMQErrorCode = /WRONGTYPE/.test(message)
    ? 'ERR_WRONG_TYPE'
    : /user_script|NOSCRIPT|ERR Error (running|compiling) script/i.test(message)
      ? 'ERR_SCRIPT'
      : CONNECTION_FAILURE.test(message)
        ? 'ERR_CONNECTION'
        : 'ERR_REDIS'
  const hint = code === 'ERR_WRONG_TYPE' ? ' (a key under this queue has the wrong Redis type; another program may be using the same prefix)' : ''
  return new EchoMQError(code, `${what} ${queue}: ${message}${hint}`, { cause: err })
}
