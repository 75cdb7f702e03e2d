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

export class EchoMQError extends Error {
  readonly code: EchoMQErrorCode

  constructor(code: EchoMQErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'EchoMQError'
    this.code = code
  }
}

/** Turns a Redis reply error into an EchoMQError naming the queue; a WRONGTYPE reply means a foreign key sits under the queue's prefix. */
export function redisError(queue: string, what: string, err: unknown): EchoMQError {
  if (err instanceof EchoMQError) return err
  const message = err instanceof Error ? err.message : String(err)
  const code = /WRONGTYPE/.test(message) ? 'ERR_WRONG_TYPE' : /ERR .*script|NOSCRIPT|user_script/i.test(message) ? 'ERR_SCRIPT' : 'ERR_CONNECTION'
  const hint = code === 'ERR_WRONG_TYPE' ? ' (a key under this queue has the wrong Redis type; another program may be using the same prefix)' : ''
  return new EchoMQError(code, `${what} ${queue}: ${message}${hint}`, { cause: err })
}
