/**
 * QueueCore: what every part of a Queue acts through: its name, keys, settings and connection, `call`
 * (a Redis call failing with ERR_CLOSED when the queue closes first, and with the connection's last error
 * named), the scope its jobs act through, the ids it gives and the deduplication holders it knows. The
 * public Queue (lib/queue.ts) makes one and delegates each method to the module of its group under queue/.
 */
import type { EventEmitter } from 'node:events'
import { KnownHolders } from '../deduplication.js'
import { EchoMQError } from '../errors.js'
import { jobFlows } from '../flows/job-flows.js'
import type { JobQueue, JobScope } from '../job.js'
import { jobChanges } from '../job-changes.js'
import { jobFinishes } from '../job-finishes.js'
import type { QueueSettings } from '../options.js'
import { type Connection, openConnection, type RedisClient, resilient } from '../redis/connection.js'
import { connectionFailure } from '../redis/connection-failure.js'
import { type QueueKeys, queueKeys } from '../redis/keys.js'
import { reserveJobIds, setEventsMaxLen } from '../redis/queries.js'
import { registration } from '../registry.js'
import { checkInteger } from '../validate.js'
import { JobIds } from './job-ids.js'
import { jobScope } from './job-scope.js'

/**
 * How long a Queue's call waits for Redis, reconnects included: a Redis that accepts connections but never
 * answers (stopped, or behind a stalled link) fails the call with ERR_CONNECTION rather than holding it.
 * Every call is a few milliseconds of server time. A call that timed out may still be applied when Redis
 * answers later: add() again with the same jobId (an existing jobId changes nothing).
 */
const COMMAND_TIMEOUT_MS = 5_000

export class QueueCore {
  readonly keys: QueueKeys
  readonly settings: QueueSettings
  readonly conn: Connection
  readonly register: () => Promise<unknown>
  /** Set by close(): later calls are refused. */
  closing: Promise<void> | undefined
  /** Calls waiting on Redis: close() fails them, as a connection closed while reconnecting never answers. */
  readonly waiting = new Set<() => void>()
  /** What the jobs this queue gives out act through (unfenced: no run owns them here). */
  readonly scope: JobScope
  /** The ids of jobs added without one. */
  readonly ids: JobIds
  /** The holders of the deduplication ids this queue added with (lib/deduplication.ts). */
  readonly known = new KnownHolders()

  constructor(
    /** The Queue: where its events go, and what its jobs' queue() returns. */
    readonly emitter: EventEmitter & JobQueue,
    readonly name: string,
    connection: unknown,
    settings: QueueSettings,
  ) {
    this.settings = settings
    this.keys = queueKeys(settings.prefix, name)
    this.conn = openConnection(connection, { redisOptions: resilient(undefined, COMMAND_TIMEOUT_MS) })
    this.register = registration(this.conn.client, settings.prefix, name, () => performance.now())
    void this.register()
    if (settings.eventsMaxLen !== undefined) {
      void setEventsMaxLen(this.conn.client, this.keys, settings.eventsMaxLen).catch(() => undefined)
    }
    const call = <T>(what: string, fn: () => Promise<T>) => this.call(what, fn)
    const changes = jobChanges({ client: this.conn.client, keys: this.keys, queue: name, maxDataBytes: settings.maxDataBytes, call })
    const progressed = (id: string, progress: unknown) => this.emitter.emit('progress', id, progress)
    const flows = jobFlows({ client: this.conn.client, keys: this.keys, queue: name, call })
    // A Queue's job has no worker to take a next one: fetchNext takes nothing (lib/job-finishes.ts).
    const finishes = jobFinishes({ client: this.conn.client, keys: this.keys, queue: name, call })
    this.scope = jobScope(this.conn.client, this.keys, name, call, emitter, progressed, { changes, flows, finishes })
    this.ids = new JobIds((n) => reserveJobIds(this.conn.client, this.keys, n))
  }

  get client(): RedisClient {
    return this.conn.client
  }

  /** Runs `fn`, failing with ERR_CLOSED if the queue closes first (one promise per call: every add takes this path). */
  call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const fail = () => reject(new EchoMQError('ERR_CLOSED', `${what} ${this.name}: the queue was closed before Redis answered`))
      this.waiting.add(fail)
      let running: Promise<T>
      try {
        running = fn()
      } catch (err) {
        running = Promise.reject(err)
      }
      running.then(
        (value) => {
          this.waiting.delete(fail)
          resolve(value)
        },
        (err: unknown) => {
          this.waiting.delete(fail)
          reject(connectionFailure(this.conn, this.name, what, err))
        },
      )
    })
  }

  assertOpen(): void {
    if (this.closing) throw new EchoMQError('ERR_CLOSED', `queue ${this.name} is closed`)
  }
}

/** A Redis-style rank (negative from the end), checked. */
export const checkRank = (name: string, v: unknown): number =>
  checkInteger(name, v, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER })
