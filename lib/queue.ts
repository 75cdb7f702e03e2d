/**
 * Queue: the producer's side, and the operator's. `add` stores a job and pushes it on `wait` (or on
 * `delayed`, with a `delay`) in one script; an existing `jobId` returns the job already stored and changes
 * nothing. `getJobs`, `retryJobs` and `remove` look at and redrive finished jobs. Inputs are validated
 * before any Redis call, so a rejected call changes nothing.
 *
 * Options: connection (ioredis client or URL; default REDIS_URL, then redis://127.0.0.1:6379),
 * prefix ('emq'), maxDataBytes (1 MiB: the largest JSON text accepted as job data), defaultJobOptions
 * (see job-options.ts: attempts, delay, backoff, removeOnComplete, removeOnFail).
 */
import { randomUUID } from 'node:crypto'
import { EchoMQError, redisError } from './errors.js'
import { JOB_STATES, type Job, type JobState, jobFromHash, type QueueCounts } from './job.js'
import { addSettings, encodeBackoff, encodeKeep, type JobOptions } from './job-options.js'
import { toJson } from './json.js'
import { type QueueSettings, queueSettings, validateJobId, validateJobName, validateQueueName } from './options.js'
import * as commands from './redis/commands.js'
import {
  type Connection,
  closeConnection,
  lastConnectionError,
  openConnection,
  type RedisClient,
  redactUrl,
  resilient,
  resolveUrl,
} from './redis/connection.js'
import { type QueueKeys, queueKeys } from './redis/keys.js'
import { failedUpTo, idsIn, newestFailedScore, readCounts, readJob, readJobs } from './redis/queries.js'
import { registration } from './registry.js'
import { checkInteger, checkKnown, describe, fail, opt } from './validate.js'

export type { JobOptions } from './job-options.js'

export type { QueueCounts }

export interface QueueOptions {
  connection?: unknown
  prefix?: string
  maxDataBytes?: number
  defaultJobOptions?: Omit<JobOptions, 'jobId'>
}

/** Most jobs one getJobs call returns, and most ids one retryJobs call names. */
export const MAX_JOBS_PER_CALL = 1_000
/**
 * How long a Queue's call waits for Redis, reconnects included: a Redis that accepts connections but never
 * answers (stopped, or behind a stalled link) fails the call with ERR_CONNECTION rather than holding it.
 * Every call is a few milliseconds of server time. A call that timed out may still be applied when Redis
 * answers later: add() again with the same jobId (an existing jobId changes nothing).
 */
const COMMAND_TIMEOUT_MS = 5_000
/** Failed jobs sent back per script call when retryJobs walks `failed`. */
const RETRY_BATCH = 100

export class Queue<Data = unknown> {
  readonly name: string
  readonly keys: QueueKeys
  private readonly settings: QueueSettings
  private readonly conn: Connection
  private readonly register: () => Promise<unknown>
  private closing: Promise<void> | undefined
  /** Where a connection EchoMQ opened goes (password masked), named in its connection errors. */
  private readonly where: string | undefined
  /** Calls waiting on Redis: close() fails them, as a connection closed while reconnecting never answers. */
  private readonly waiting = new Set<() => void>()

  constructor(name: string, options?: QueueOptions) {
    this.name = validateQueueName(name)
    const { connection, ...settings } = queueSettings(options)
    this.settings = settings
    this.keys = queueKeys(settings.prefix, this.name)
    this.conn = openConnection(connection, { redisOptions: resilient(undefined, COMMAND_TIMEOUT_MS) })
    this.where = this.conn.owned ? `Redis at ${redactUrl(resolveUrl(connection))}` : undefined
    this.register = registration(this.conn.client, settings.prefix, this.name, () => performance.now())
    void this.register()
  }

  get client(): RedisClient {
    return this.conn.client
  }

  async add(name: string, data: Data, options?: JobOptions): Promise<Job<Data>> {
    this.assertOpen()
    validateJobName(name)
    const { jobId, attempts, delay, backoff, removeOnComplete, removeOnFail } = addSettings(options, this.settings.defaultJobOptions)
    const id = jobId === undefined ? randomUUID() : validateJobId(jobId)
    const json = toJson(data, 'job data', this.settings.maxDataBytes, 'maxDataBytes')
    void this.register()
    const createdOn = await this.call('add to queue', () =>
      commands.add(this.client, this.keys, {
        id,
        name,
        data: json,
        attempts,
        delayMs: delay,
        backoff: encodeBackoff(backoff),
        keep: encodeKeep(removeOnComplete),
        keepFailed: encodeKeep(removeOnFail),
      }),
    )
    if (createdOn !== undefined) {
      const job: Job<Data> = { id, name, data, attempts, attemptsMade: 0, attemptsStarted: 0, state: 'wait', createdOn }
      if (delay > 0) Object.assign(job, { state: 'delayed', dueAt: createdOn + delay })
      return job
    }
    const existing = await this.getJob(id)
    if (!existing) throw new EchoMQError('ERR_SCRIPT', `job ${id} in queue ${this.name} vanished while being added`)
    return existing
  }

  async getJob(id: string): Promise<Job<Data> | null> {
    this.assertOpen()
    validateJobId(id)
    const hash = await this.call('read job of queue', () => readJob(this.client, this.keys, id))
    return Object.keys(hash).length === 0 ? null : (jobFromHash(id, hash) as Job<Data>)
  }

  /**
   * Jobs in one state, a page at a time (`start`, `end`: inclusive ranks, at most MAX_JOBS_PER_CALL):
   * `wait` in the order they will run (those a busy worker reserved for its next calls first), `delayed`
   * by due time, `active` by lease deadline, `completed` and `failed` most recent first. Jobs removed
   * while being read are left out.
   */
  async getJobs(state: JobState, range?: { start?: number; end?: number }): Promise<Job<Data>[]> {
    this.assertOpen()
    if (!JOB_STATES.includes(state)) fail('ERR_OPTIONS', `expected a state, one of ${JOB_STATES.join(', ')}, got: ${describe(state)}`)
    const r = checkKnown('getJobs', range, ['start', 'end'])
    const start = opt(r.start, 0, (v) => checkInteger('start', v, { min: 0, max: Number.MAX_SAFE_INTEGER }))
    const end = opt(r.end, start + 99, (v) => checkInteger('end', v, { min: start, max: start + MAX_JOBS_PER_CALL - 1 }))
    const { ids, hashes } = await this.call(`list ${state} jobs of queue`, async () => {
      const ids = await idsIn(this.client, this.keys, state, start, end)
      return { ids, hashes: await readJobs(this.client, this.keys, ids) }
    })
    return ids.flatMap((id, i) => {
      const hash = hashes[i] ?? {}
      return Object.keys(hash).length === 0 ? [] : [jobFromHash(id, hash) as Job<Data>]
    })
  }

  /**
   * Sends failed jobs back to `wait` with a fresh attempts budget, keeping their history (the last error
   * in `lastError`, all runs in `attemptsStarted`). `ids`: those jobs, every one of which must be failed
   * (else ERR_JOB_STATE and nothing changes); otherwise the oldest failed jobs, at most `limit` (all).
   * Resolves to the ids moved.
   */
  async retryJobs(options?: { ids?: string[]; limit?: number }): Promise<string[]> {
    this.assertOpen()
    const o = checkKnown('retryJobs', options, ['ids', 'limit'])
    if (o.ids !== undefined && o.limit !== undefined) fail('ERR_OPTIONS', 'retryJobs takes ids or limit, not both')
    if (o.ids !== undefined) {
      if (!Array.isArray(o.ids) || o.ids.length === 0 || o.ids.length > MAX_JOBS_PER_CALL) {
        fail('ERR_OPTIONS', `expected ids to be an array of 1-${MAX_JOBS_PER_CALL} job ids, got: ${describe(o.ids)}`)
      }
      const ids = [...new Set(o.ids.map((id) => validateJobId(id)))]
      const { moved, notFailed } = await this.call('retry failed jobs of queue', () => commands.retry(this.client, this.keys, ids, true))
      if (notFailed !== undefined) {
        const what = notFailed.state === 'missing' ? 'does not exist' : `is ${notFailed.state}, not failed`
        throw new EchoMQError('ERR_JOB_STATE', `job ${notFailed.id} of queue ${this.name} ${what}; nothing was retried`)
      }
      return moved
    }
    const limit = opt(o.limit, Number.POSITIVE_INFINITY, (v) => checkInteger('limit', v, { min: 1, max: Number.MAX_SAFE_INTEGER }))
    // Only the jobs failed when the call began, each once: with workers failing them again meanwhile (the
    // downstream is still down), re-reading `failed` from its start would send them back over and over.
    const bound = await this.call('retry failed jobs of queue', () => newestFailedScore(this.client, this.keys))
    if (bound === undefined) return []
    const moved = new Set<string>()
    // Jobs this call retried that failed again within the same millisecond as `bound` are still in range:
    // stepped over, not retried twice.
    let skip = 0
    while (moved.size < limit) {
      const n = Math.min(RETRY_BATCH, limit - moved.size)
      const batch = await this.call('retry failed jobs of queue', async () => {
        const read = await failedUpTo(this.client, this.keys, bound, skip, n)
        const ids = read.filter((id) => !moved.has(id))
        skip += read.length - ids.length
        if (read.length === 0) return undefined
        return ids.length === 0 ? [] : (await commands.retry(this.client, this.keys, ids, false, bound)).moved
      })
      if (batch === undefined) break
      for (const id of batch) moved.add(id)
    }
    return [...moved]
  }

  /** Removes a job that is not in flight (ERR_JOB_ACTIVE if it is); resolves to whether there was one. */
  async remove(id: string): Promise<boolean> {
    this.assertOpen()
    validateJobId(id)
    const outcome = await this.call('remove a job of queue', () => commands.remove(this.client, this.keys, id))
    if (outcome === 'active') throw new EchoMQError('ERR_JOB_ACTIVE', `job ${id} of queue ${this.name} is in flight; it was not removed`)
    return outcome === 'removed'
  }

  async counts(): Promise<QueueCounts> {
    this.assertOpen()
    return this.call('count jobs of queue', () => readCounts(this.client, this.keys))
  }

  /** Closes the connection (if EchoMQ opened it) after the calls in flight are answered; calls Redis
   * cannot answer (it is unreachable) fail with ERR_CLOSED. Safe to call more than once. */
  close(): Promise<void> {
    this.closing ??= closeConnection(this.conn).finally(() => {
      for (const fail of this.waiting) fail()
    })
    return this.closing
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let fail: () => void = () => undefined
    const closed = new Promise<never>((_, reject) => {
      fail = () => reject(new EchoMQError('ERR_CLOSED', `${what} ${this.name}: the queue was closed before Redis answered`))
    })
    this.waiting.add(fail)
    try {
      return await Promise.race([fn(), closed])
    } catch (err) {
      const failure = redisError(this.name, what, err, lastConnectionError(this.client))
      if (failure.code === 'ERR_CONNECTION' && this.where) failure.message += ` (${this.where})`
      throw failure
    } finally {
      this.waiting.delete(fail)
    }
  }

  private assertOpen(): void {
    if (this.closing) throw new EchoMQError('ERR_CLOSED', `queue ${this.name} is closed`)
  }
}

/** A queue's counts, on a client the caller holds (the command's): see readCounts. */
export async function queueCounts(client: RedisClient, keys: QueueKeys, queue: string): Promise<QueueCounts> {
  try {
    return await readCounts(client, keys)
  } catch (err) {
    throw redisError(queue, 'count jobs of queue', err)
  }
}
