/**
 * Queue: the producer's side. `add` stores a job and pushes it on `wait` in one script; an existing
 * `jobId` returns the job already stored and changes nothing. Inputs are validated before any Redis call.
 *
 * Options: connection (ioredis client or URL; default REDIS_URL, then redis://127.0.0.1:6379),
 * prefix ('emq'), maxDataBytes (1 MiB: the largest JSON text accepted as job data).
 */
import { randomUUID } from 'node:crypto'
import * as commands from './commands.js'
import { type Connection, closeConnection, openConnection } from './connection.js'
import { EchoMQError, redisError } from './errors.js'
import { type Job, jobFromHash } from './job.js'
import { type QueueKeys, queueKeys } from './keys.js'
import { addSettings, type QueueSettings, queueSettings, validateJobId, validateQueueName } from './options.js'
import { registration } from './registry.js'

export interface QueueCounts {
  wait: number
  active: number
  /** Jobs in `active` that a sweep has marked (they are counted in `active` too). */
  stalled: number
  /** Jobs scheduled for later; optional until every reader fills it. */
  delayed?: number
  completed: number
  failed: number
}

const MAX_JOB_NAME_LENGTH = 256

function serialise(data: unknown, maxBytes: number): string {
  let json: string | undefined
  try {
    json = JSON.stringify(data)
  } catch (err) {
    throw new EchoMQError('ERR_JOB_DATA', `job data is not JSON-serialisable: ${(err as Error).message}`, { cause: err })
  }
  if (json === undefined) throw new EchoMQError('ERR_JOB_DATA', `job data is not JSON-serialisable: got ${typeof data}`)
  const bytes = Buffer.byteLength(json)
  if (bytes > maxBytes) throw new EchoMQError('ERR_JOB_DATA', `job data is ${bytes} bytes as JSON, more than maxDataBytes (${maxBytes})`)
  return json
}

export class Queue<Data = unknown> {
  readonly name: string
  readonly keys: QueueKeys
  private readonly settings: QueueSettings
  private readonly conn: Connection
  private readonly register: () => Promise<unknown>
  private closing: Promise<void> | undefined

  constructor(name: string, options?: { connection?: unknown; prefix?: string; maxDataBytes?: number }) {
    this.name = validateQueueName(name)
    const { connection, ...settings } = queueSettings(options)
    this.settings = settings
    this.keys = queueKeys(settings.prefix, this.name)
    this.conn = openConnection(connection)
    this.register = registration(this.conn.client, settings.prefix, this.name)
    void this.register()
  }

  get client() {
    return this.conn.client
  }

  async add(name: string, data: Data, options?: { attempts?: number; jobId?: string }): Promise<Job<Data>> {
    this.assertOpen()
    if (typeof name !== 'string' || name.length === 0 || name.length > MAX_JOB_NAME_LENGTH) {
      throw new EchoMQError('ERR_JOB_NAME', `expected a job name of 1-${MAX_JOB_NAME_LENGTH} characters, got: ${JSON.stringify(name)}`)
    }
    const { attempts, jobId } = addSettings(options)
    const json = serialise(data, this.settings.maxDataBytes)
    const id = jobId ?? randomUUID()
    try {
      void this.register()
      const added = await commands.add(this.client, this.keys, { id, name, data: json, attempts })
      if (added === 'added') return { id, name, data, attempts, attemptsMade: 0, attemptsStarted: 0, state: 'wait', createdOn: Date.now() }
    } catch (err) {
      throw redisError(this.name, 'add to queue', err)
    }
    const existing = await this.getJob(id)
    if (!existing) throw new EchoMQError('ERR_SCRIPT', `job ${id} in queue ${this.name} vanished while being added`)
    return existing as Job<Data>
  }

  async getJob(id: string): Promise<Job<Data> | null> {
    validateJobId(id)
    try {
      const hash = await this.client.hgetall(this.keys.job(id))
      return Object.keys(hash).length === 0 ? null : (jobFromHash(id, hash) as Job<Data>)
    } catch (err) {
      throw redisError(this.name, 'read job of queue', err)
    }
  }

  async counts(): Promise<QueueCounts> {
    return queueCounts(this.client, this.keys, this.name)
  }

  close(): Promise<void> {
    this.closing ??= closeConnection(this.conn)
    return this.closing
  }

  private assertOpen(): void {
    if (this.closing) throw new EchoMQError('ERR_CLOSED', `queue ${this.name} is closed`)
  }
}

export async function queueCounts(client: Connection['client'], keys: QueueKeys, queue: string): Promise<QueueCounts> {
  try {
    const [wait, active, stalled, completed, failed] = await Promise.all([
      client.llen(keys.wait),
      client.zcard(keys.active),
      client.zcard(keys.stalled),
      client.zcard(keys.completed),
      client.zcard(keys.failed),
    ])
    return { wait, active, stalled, completed, failed }
  } catch (err) {
    throw redisError(queue, 'count jobs of queue', err)
  }
}
