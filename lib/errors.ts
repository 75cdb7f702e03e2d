/**
 * EchoMQError: every error EchoMQ raises on purpose carries a stable `code`, so callers can branch on it
 * without parsing messages, and where it helps the setting at fault (`variable`) and what to do (`hint`),
 * so a caller that rewords or re-routes an error (packaging, the Lambda's log line) reads fields, not text.
 * Input errors are raised before any Redis write.
 */
export type EchoMQErrorCode =
  | 'ERR_QUEUE_NAME'
  | 'ERR_JOB_ID'
  | 'ERR_JOB_NAME'
  | 'ERR_JOB_DATA'
  | 'ERR_OPTIONS'
  | 'ERR_CONNECTION'
  | 'ERR_AUTH'
  | 'ERR_CONFIG'
  | 'ERR_EVENT'
  | 'ERR_LOCK_LOST'
  | 'ERR_WRONG_TYPE'
  | 'ERR_SCRIPT'
  | 'ERR_SWEEP'
  | 'ERR_CLOSED'
  | 'ERR_REDIS'
  | 'ERR_OOM'
  | 'ERR_NOPERM'
  | 'ERR_JOB_ACTIVE'
  | 'ERR_JOB_STATE'
  | 'ERR_JOB_MISSING'
  | 'ERR_JOB_FAILED'
  | 'ERR_TIMEOUT'
  | 'ERR_QUEUE_ACTIVE'

export interface EchoMQErrorDetails {
  cause?: unknown
  /** The setting at fault, as the user wrote it: an option, a variable (`SWEEP_GRACE_MS`) or a parameter. */
  variable?: string
  /** What to do about it, when the message alone does not say. */
  hint?: string
}

export class EchoMQError extends Error {
  readonly code: EchoMQErrorCode
  readonly variable?: string
  readonly hint?: string

  constructor(code: EchoMQErrorCode, message: string, { cause, variable, hint }: EchoMQErrorDetails = {}) {
    super(message, cause === undefined ? undefined : { cause })
    this.name = 'EchoMQError'
    this.code = code
    if (variable !== undefined) this.variable = variable
    if (hint !== undefined) this.hint = hint
  }
}

const CONNECTION_FAILURE = new RegExp(
  /connect|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|EPIPE|closed|timed? ?out|max retries|not writeable|NOAUTH|WRONGPASS|/
    .source + /LOADING|CLUSTERDOWN|MASTERDOWN|READONLY/.source,
  'i',
)

/** ioredis attaches the failed command to reply errors (`err.command.args`); for AUTH and HELLO that is the password. */
export function withoutSecrets<T>(err: T): T {
  let e: unknown = err
  for (let depth = 0; e !== null && typeof e === 'object' && depth < 5; depth++) {
    const command = (e as { command?: { name?: unknown; args?: unknown[] } }).command
    if (command && /^(auth|hello)$/i.test(String(command.name))) command.args = ['***']
    e = (e as { cause?: unknown }).cause
  }
  return err
}

/** ioredis reports a failed handshake (TLS, DNS, AUTH) to commands only as retries; name the real cause. */
export function withLastError(message: string, last: Error | undefined): string {
  // ioredis's "Reached the max retries per request limit (which is 3). Refer to ..." says only that it gave the
  // command up; the connection error says why.
  if (last && MAX_RETRIES.test(message)) return `no connection (retrying): ${last.message}`
  return last && !message.includes(last.message) ? `${message} (last connection error: ${last.message})` : message
}

const MAX_RETRIES = /^Reached the max retries per request limit/

function replyCode(message: string): EchoMQErrorCode {
  if (/WRONGTYPE/.test(message)) return 'ERR_WRONG_TYPE'
  if (/^OOM\b|\bOOM command not allowed/.test(message)) return 'ERR_OOM'
  if (/^NOPERM\b|\bNOPERM\b|can't run this command or subcommand/.test(message)) return 'ERR_NOPERM'
  if (/user_script|NOSCRIPT|ERR Error (running|compiling) script/i.test(message)) return 'ERR_SCRIPT'
  if (CONNECTION_FAILURE.test(message) || NOT_REDIS.test(message)) return 'ERR_CONNECTION'
  return 'ERR_REDIS'
}

/** What ioredis says when the server at the address answers in another protocol (HTTP, TLS, ...). */
export const NOT_REDIS = /Unknown RESP type|Protocol error/i

/** A connection the server dropped (an HTTP server may reset it before its answer is read, a TLS port always does). */
const DROPPED = /ECONNRESET|EPIPE/

/** A hint for a server that answers, but not as Redis does (the address is another service's), or drops the line. */
export function notRedisHint(message: string): string {
  if (NOT_REDIS.test(message))
    return ' (something answers at this address, but not as Redis does: check the host and port, and rediss:// for TLS)'
  if (DROPPED.test(message))
    return ' (the server at this address dropped the connection: if it keeps doing so, check the host and port (is it Redis?), and rediss:// for TLS)'
  return ''
}

const HINTS: Partial<Record<EchoMQErrorCode, string>> = {
  ERR_WRONG_TYPE: ' (a key under this queue has the wrong Redis type; another program may be using the same prefix)',
  ERR_OOM:
    ' (Redis is out of memory: maxmemory is reached and the policy refuses writes that need memory, so no job can be ' +
    'added and the sweep cannot mark stalled jobs until memory is freed (finishing, retrying and removing jobs may ' +
    'still work): raise maxmemory, or remove finished jobs)',
}

/** The ACL rule that grants a command EchoMQ sends (the README's ACL lines grant them all). */
const ACL_RULES: [RegExp, string][] = [
  [/^time$/, '+time (TIME is only in @fast; every script reads the clock)'],
  [/^(evalsha|eval|script)/, '+@scripting'],
  [/^(multi|exec)$/, '+@transaction'],
  [/^info$/, '+info'],
  [/^config/, '+config|get'],
  [/^cluster/, '+cluster|slots +cluster|info'],
  [/^(hello|auth|ping|quit|select|client)/, '+@connection'],
  [/^(bzpopmin|sadd|set|del|unlink|rpush|lpush|rpop|lrem|zadd|zrem|hset|hdel|hincrby|pexpireat)/, '+@write'],
]

/** What to add to the Redis user's ACL for a NOPERM reply: the key pattern, or the command's rule. */
function permissionHint(message: string): string {
  if (/access one of the keys|permissions to access/.test(message))
    return "the user's key patterns must cover the queue's keys: add ~<prefix>:* (~emq:* by default)"
  const command = /run the '([\w|]+)' command|refused inside the script: (\w+)/i.exec(message)
  const name = (command?.[1] ?? command?.[2] ?? '').toLowerCase()
  if (name === '') return 'compare the user with the ACL lines in the README (Deploying the reaper, step 1)'
  const rule = ACL_RULES.find(([pattern]) => pattern.test(name))?.[1] ?? '+@read'
  return `the Redis user may not run ${name.toUpperCase()}: add ${rule} to its ACL (README: Deploying the reaper, step 1)`
}

/** Turns a Redis reply error into an EchoMQError naming the queue; a WRONGTYPE reply means a foreign key sits under the queue's prefix. */
export function redisError(queue: string, what: string, err: unknown, lastConnectionError?: Error): EchoMQError {
  if (err instanceof EchoMQError) return err
  const message = withLastError(err instanceof Error ? err.message : String(err), lastConnectionError)
  // A connection problem a diagnosis explained (lib/redis/diagnosis.ts) is one, whatever its words.
  const code = (err as Error | undefined)?.name === 'ConnectionProblem' ? 'ERR_CONNECTION' : replyCode(message)
  const hint = code === 'ERR_NOPERM' ? permissionHint(message) : undefined
  const more = hint ? ` (${hint})` : (HINTS[code] ?? notRedisHint(message))
  return new EchoMQError(code, `${what} ${queue}: ${message}${more}`, {
    cause: withoutSecrets(err),
    ...(hint ? { hint } : {}),
  })
}

/**
 * Thrown by a processor to fail its job at once, whatever attempts remain (BullMQ's name and behaviour):
 * the job goes to `failed` with this error's message, using one attempt, with no retry.
 */
export class UnrecoverableError extends Error {
  constructor(message = 'unrecoverable') {
    super(message)
    this.name = 'UnrecoverableError'
  }
}

/**
 * A thrown value as text for a message, never throwing itself: a value can throw when read (a getter on its
 * message or name, a Proxy, a toString that throws).
 */
export function thrownText(value: unknown): string {
  try {
    return String((value as { message?: unknown } | null)?.message ?? value)
  } catch {
    return 'a value that cannot be read'
  }
}

/**
 * Thrown by a processor that learnt it must back off (an API said 429): the job goes back to the front of
 * the line without using an attempt, as BullMQ does; pair it with `queue.rateLimit(ms)`, which holds every
 * worker of the queue for that long. `throw Worker.RateLimitError()` makes one.
 */
export class RateLimitError extends Error {
  constructor(message = 'rate limit exceeded') {
    super(message)
    this.name = 'RateLimitError'
  }
}

export const isRateLimit = (err: unknown): boolean =>
  err instanceof RateLimitError || (err instanceof Error && err.name === 'RateLimitError')

/** An UnrecoverableError, or an error that says it is one by name (thrown by another copy of the library). */
export const isUnrecoverable = (err: unknown): boolean =>
  err instanceof UnrecoverableError || (err instanceof Error && err.name === 'UnrecoverableError')

/**
 * Thrown by a processor right after `await job.moveToDelayed(timestamp, token)` (BullMQ's name and
 * meaning): the job is already in `delayed`, so the worker neither fails nor completes it, and no attempt
 * is used. Thrown without a successful moveToDelayed, the job goes back to `wait` with no attempt used and
 * the worker reports an `error` (BullMQ would leave it in flight until the stalled check).
 */
export class DelayedError extends Error {
  constructor(message = 'bullmq:movedToDelayed') {
    super(message)
    this.name = 'DelayedError'
  }
}

/** A DelayedError, or an error that says it is one by name (thrown by another copy of the library, or BullMQ's). */
export const isDelayed = (err: unknown): boolean => err instanceof DelayedError || (err instanceof Error && err.name === 'DelayedError')

/**
 * Thrown by a processor right after `await job.moveToWaitingChildren(token)` resolved true (BullMQ's name and
 * meaning): the job waits in `waiting-children` for its pending children and runs again once they settle,
 * so the worker neither fails nor completes it, and no attempt is used. Thrown without a successful move, the
 * job goes back to `wait` with no attempt used and the worker reports an `error`.
 */
export class WaitingChildrenError extends Error {
  constructor(message = 'bullmq:movedToWaitingChildren') {
    super(message)
    this.name = 'WaitingChildrenError'
  }
}

/** A WaitingChildrenError, or an error that says it is one by name. */
export const isWaitingChildren = (err: unknown): boolean =>
  err instanceof WaitingChildrenError || (err instanceof Error && err.name === 'WaitingChildrenError')
