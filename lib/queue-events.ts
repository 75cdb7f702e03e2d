/**
 * QueueEvents: a queue's events, from every process that touches it (producers, workers, the sweep and
 * the Lambda reaper), read from the queue's stream (`<prefix>:{q}:events`) with a blocking XREAD. Events
 * and payloads are BullMQ's: `added` ({ jobId, name }), `waiting` ({ jobId, prev? }), `delayed` ({ jobId,
 * delay }: the due time, ms), `active`, `progress` ({ jobId, data }), `completed` ({ jobId, returnvalue,
 * prev }), `failed` ({ jobId, failedReason, prev }), `retries-exhausted` ({ jobId, attemptsMade }),
 * `stalled` ({ jobId }), `removed` ({ jobId, prev }), `duplicated`, `cleaned` ({ count }), `paused`,
 * `resumed` ({}), and `drained`; each listener gets (payload, event id), `drained` (event id) alone, and
 * an event about a job is also emitted as `<event>:<jobId>`.
 *
 * The scripts write the stream only while someone listens: each QueueEvents keeps its own mark in the
 * queue's `listened` key (lua/listen-1.lua), for LISTEN_TTL_MS (at least three blocking timeouts), renewed
 * every third of that as it reads; the key lives as long as the latest mark, and close() takes the
 * listener's mark away (the key with it when it was the last), so a queue nobody watches keeps no stream
 * and pays one EXISTS per script call. `waitUntilReady()` resolves once the mark is set and the reading
 * position is fixed: no event after it is missed while Redis keeps its data. A Redis that loses it (a
 * restart without persistence, a failover to an empty replica, a flush) loses the marks too, and the
 * scripts write nothing until a listener marks again: each marks again as soon as its connection comes
 * back, or (no reconnect) at its next renewal, which finds its mark gone. Events in between are lost to
 * `on(...)` listeners; waitUntilFinished re-reads its job then, so it misses no finish. A failed read is
 * reported once until a read succeeds.
 *
 * Options: connection (a URL or an ioredis client; default redis://127.0.0.1:6379, as BullMQ's), prefix
 * ('emq'), lastEventId (read from this stream id; default: events after waitUntilReady), blockingTimeout
 * (ms per XREAD, 10000), autorun (true; else call run()).
 */
import { randomUUID } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { settlesWithin, systemClock } from './clock.js'
import { EchoMQError, redisError } from './errors.js'
import type { QueueEventsListener, Untyped } from './listeners.js'
import { PREFIX_DEFAULT, validatePrefix, validateQueueName } from './options.js'
import { listen } from './redis/commands.js'
import { type Connection, closeConnection, duplicateClient, openConnection, type RedisClient, resilient } from './redis/connection.js'
import { connectionFailure } from './redis/connection-failure.js'
import type { ConnectionOptions } from './redis/connection-options.js'
import { type QueueKeys, queueKeys } from './redis/keys.js'
import { lastEventId, readEvents } from './redis/queries.js'
import { checkInteger, checkKnown, describe, fail, opt } from './validate.js'

export interface QueueEventsOptions {
  connection?: ConnectionOptions | undefined
  prefix?: string
  /** Read from this stream id (exclusive); default: every event after waitUntilReady(). */
  lastEventId?: string
  /** How long one XREAD blocks (ms). */
  blockingTimeout?: number
  /** Start reading at once (default), or when run() is called. */
  autorun?: boolean
}

const BLOCKING_TIMEOUT_MS_DEFAULT = 10_000
/** How long a listener's mark lives without a refresh (ms): the scripts stop writing events this long after the last listener went. */
export const LISTEN_TTL_MS = 60_000
/** Entries per XREAD. */
const READ_COUNT = 100
/** After a failed read, the next try. */
const RETRY_MS = 1_000
/** How long close() waits for Redis to take the listener's mark away (ms); past it, the mark expires alone. */
const LEAVE_TIMEOUT_MS = 1_000
const STREAM_ID = /^(\d+-\d+|\d+|\$)$/

/** BullMQ's fields that hold something other than text: parsed back. */
function payload(event: string, fields: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (let i = 0; i + 1 < fields.length; i += 2) out[fields[i] as string] = fields[i + 1]
  const parse = (key: string) => {
    if (typeof out[key] !== 'string') return
    try {
      out[key] = JSON.parse(out[key] as string)
    } catch {
      // Not JSON (never written so by EchoMQ): left as the text it is.
    }
  }
  if (event === 'progress') parse('data')
  if (event === 'completed') parse('returnvalue')
  if (event === 'delayed' && out.delay !== undefined) out.delay = Number(out.delay)
  return out
}

/**
 * What waitUntilFinished hears of one job. Kept by the QueueEvents itself, not as emitter listeners, so
 * any number of waits cost no listener each (and no MaxListenersExceededWarning).
 */
interface JobWatch {
  /** The job completed, or failed for good: the event's payload. */
  finished(event: 'completed' | 'failed', data: Record<string, unknown>): void
  /** The listener's mark was lost and is set again: the job's finish may have gone unwritten meanwhile. */
  markedAgain(): void
  /** The QueueEvents is closing. */
  closing(): void
}

/**
 * BullMQ's typed events (QueueEventsListener): `on('completed', ({ jobId, returnvalue }) => ...)`; a
 * listener type of one's own (`on<MyListener>(...)`) names more, such as `completed:<jobId>`.
 */
export interface QueueEvents<ReturnType = Untyped> {
  on<
    L extends QueueEventsListener<ReturnType> = QueueEventsListener<ReturnType>,
    U extends Extract<keyof L, string> = Extract<keyof L, string>,
  >(event: U, listener: L[U]): this
  once<
    L extends QueueEventsListener<ReturnType> = QueueEventsListener<ReturnType>,
    U extends Extract<keyof L, string> = Extract<keyof L, string>,
  >(event: U, listener: L[U]): this
  off<
    L extends QueueEventsListener<ReturnType> = QueueEventsListener<ReturnType>,
    U extends Extract<keyof L, string> = Extract<keyof L, string>,
  >(event: U, listener: L[U]): this
}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface above only types on/once/off (BullMQ's QueueEventsListener)
// biome-ignore lint/correctness/noUnusedVariables: ReturnType types the merged interface's listeners (it must be named alike)
export class QueueEvents<ReturnType = Untyped> extends EventEmitter {
  readonly name: string
  readonly keys: QueueKeys
  private readonly conn: Connection
  private readonly blocking: RedisClient
  private readonly blockMs: number
  private readonly ttlMs: number
  private readonly startId: string | undefined
  /** This listener's mark in `listened`. */
  private readonly listenerId = randomUUID()
  private readonly watches = new Map<string, Set<JobWatch>>()
  private ready: Promise<void> | undefined
  private running: Promise<void> | undefined
  private closed = false
  private position = '$'
  private markedAt = Number.NEGATIVE_INFINITY
  /** Marks asked for (the first, then one per reconnect) and the last one set: behind means mark now. */
  private marksWanted = 1
  private marksSet = 0
  /** The marks in flight, one after the other, so a late one never lands after close()'s leave. */
  private marking: Promise<void> = Promise.resolve()
  private dropped = false

  constructor(name: string, options?: QueueEventsOptions) {
    super()
    this.name = validateQueueName(name)
    const o = checkKnown('QueueEvents', options, ['connection', 'prefix', 'lastEventId', 'blockingTimeout', 'autorun'])
    const prefix = opt(o.prefix, PREFIX_DEFAULT, validatePrefix)
    this.blockMs = opt(o.blockingTimeout, BLOCKING_TIMEOUT_MS_DEFAULT, (v) =>
      checkInteger('blockingTimeout', v, { min: 1, max: 600_000, unit: 'ms' }),
    )
    this.startId = opt(o.lastEventId, undefined, (v) => {
      if (typeof v !== 'string' || !STREAM_ID.test(v))
        fail('ERR_OPTIONS', `expected lastEventId to be a stream id such as 0-0, got: ${describe(v)}`)
      return v
    })
    const autorun = opt(o.autorun, true, (v) => {
      if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected autorun to be true or false, got: ${describe(v)}`)
      return v
    })
    this.ttlMs = Math.max(LISTEN_TTL_MS, 3 * this.blockMs)
    this.keys = queueKeys(prefix, this.name)
    this.conn = openConnection(o.connection, { redisOptions: resilient() })
    // XREAD BLOCK holds its connection; the mark is set on the other, which stays free.
    this.blocking = duplicateClient(this.conn.client)
    this.blocking.on('error', () => undefined)
    // A connection back may be a Redis back without its data, marks included: mark again at once, not at
    // the next renewal. The blocking connection is ours alone (the other may be the caller's client).
    this.blocking.on('close', () => {
      this.dropped = true
    })
    this.blocking.on('ready', () => {
      if (!this.dropped || this.marksSet === 0) return
      this.dropped = false
      this.marksWanted++
      // A failure leaves the mark wanted: the reading loop tries again, and reports it.
      this.markNow().catch(() => undefined)
    })
    if (autorun) void this.run()
  }

  /** Resolves once the listener has said it listens and fixed where it reads from. */
  waitUntilReady(): Promise<void> {
    if (this.closed) return Promise.reject(new EchoMQError('ERR_CLOSED', `queue events of ${this.name} are closed`))
    this.ready ??= this.start()
    return this.ready
  }

  /** Reads until close(); resolves then. A second call is refused as BullMQ's ("Queue Events is already running."). */
  run(): Promise<void> {
    if (this.running) return Promise.reject(new EchoMQError('ERR_OPTIONS', `Queue Events is already running. (queue ${this.name})`))
    this.running = this.waitUntilReady().then(
      () => this.consume(),
      (err) => void this.report(err),
    )
    return this.running
  }

  /** Stops reading, takes the listener's mark away and closes the connections. Safe to call more than once. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.emit('closing')
    for (const watch of this.watching()) watch.closing()
    this.blocking.disconnect()
    await this.leave()
    await closeConnection(this.conn)
    await this.readLoopEnded()
  }

  /**
   * Waits for the read loop to see the close, at most LEAVE_TIMEOUT_MS: its command in flight fails with the
   * disconnect, except on a client already waiting to reconnect (Redis gone), where ioredis holds it until
   * a reconnect that now never comes. The loop then ends with that command, if ever; nothing waits on it.
   */
  private async readLoopEnded(): Promise<void> {
    if (this.running) await settlesWithin(systemClock, this.running, LEAVE_TIMEOUT_MS)
  }

  /**
   * @internal waitUntilFinished's hook: `watch` hears job `jobId` finish, the mark set again after it was
   * lost, and the close. Returns the function that stops it.
   */
  watchJob(jobId: string, watch: JobWatch): () => void {
    if (this.closed) {
      watch.closing()
      return () => undefined
    }
    const set = this.watches.get(jobId) ?? new Set()
    this.watches.set(jobId, set.add(watch))
    return () => {
      set.delete(watch)
      if (set.size === 0 && this.watches.get(jobId) === set) this.watches.delete(jobId)
    }
  }

  /** Every watch, copied: a watch may stop (settle) while the others are told. */
  private watching(): JobWatch[] {
    return [...this.watches.values()].flatMap((set) => [...set])
  }

  private async start(): Promise<void> {
    try {
      await this.markNow()
      this.position = this.startId ?? (await lastEventId(this.conn.client, this.keys))
    } catch (err) {
      throw connectionFailure(this.conn, this.name, 'listen to the events of queue', err)
    }
  }

  /** Due: a mark asked for and not set yet, or a third of the mark's life gone since the last. */
  private markDue(): boolean {
    return this.marksSet < this.marksWanted || performance.now() - this.markedAt > this.ttlMs / 3
  }

  /** Sets the mark if it is due, after the marks before it. */
  private markNow(): Promise<void> {
    const next = this.marking.catch(() => undefined).then(() => (this.markDue() ? this.mark() : undefined))
    this.marking = next
    return next
  }

  private async mark(): Promise<void> {
    if (this.closed) return
    const wanted = this.marksWanted
    const lost = await listen(this.conn.client, this.keys, this.listenerId, this.ttlMs)
    const first = this.marksSet === 0
    this.markedAt = performance.now()
    this.marksSet = wanted
    if (lost && !first) for (const watch of this.watching()) watch.markedAgain()
  }

  /** Takes the mark away, so the scripts stop writing for this listener now; bounded, Redis may be gone. */
  private async leave(): Promise<void> {
    const leaving = (async () => {
      await this.marking.catch(() => undefined)
      if (this.marksSet === 0 || this.conn.client.status !== 'ready') return
      await listen(this.conn.client, this.keys, this.listenerId, 0)
    })()
    await settlesWithin(systemClock, leaving, LEAVE_TIMEOUT_MS)
  }

  private async consume(): Promise<void> {
    let failing = false
    while (!this.closed) {
      try {
        if (this.markDue()) await this.markNow()
        const entries = await readEvents(this.blocking, this.keys, this.position, this.blockMs, READ_COUNT)
        failing = false
        for (const [id, fields] of entries) {
          this.position = id
          this.dispatch(id, fields)
        }
      } catch (err) {
        if (this.closed) return
        if (!failing) this.report(connectionFailure(this.conn, this.name, 'read the events of queue', err))
        failing = true
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS))
      }
    }
  }

  private dispatch(id: string, fields: string[]): void {
    const event = fields[0] === 'event' ? fields[1] : undefined
    if (event === undefined) return
    if (event === 'drained') {
      this.deliver('drained', id)
      return
    }
    const data = payload(event, fields.slice(2))
    this.deliver(event, data, id)
    if (typeof data.jobId !== 'string') return
    this.deliver(`${event}:${data.jobId}`, data, id)
    const watches = this.watches.get(data.jobId)
    if (watches && (event === 'completed' || event === 'failed')) for (const watch of [...watches]) watch.finished(event, data)
  }

  /** A listener that throws is reported as an `error` (an Error as thrown, BullMQ's), never left to stop the reading. */
  private deliver(event: string, ...args: unknown[]): void {
    try {
      this.emit(event, ...args)
    } catch (err) {
      if (err instanceof Error && this.listenerCount('error') > 0) this.report(err)
      else
        this.report(new EchoMQError('ERR_OPTIONS', `a '${event}' listener of queue events ${this.name} threw: ${(err as Error)?.message}`))
    }
  }

  private report(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err)
    else console.error(`[echomq] queue events ${this.name}:`, err instanceof Error ? err.message : err)
  }
}

/** What waitUntilFinished reads of the job once it listens: its state and outcome (undefined: no such job). */
export type ReadOutcome = () => Promise<{ state: string | undefined; returnValue: string | undefined; failedReason: string | undefined }>

/**
 * Resolves to a job's return value when it completes, rejects with ERR_JOB_FAILED (its failure reason as
 * the message) when it fails for good, with ERR_TIMEOUT after `ttl` ms, with ERR_JOB_MISSING when it no
 * longer exists, and with ERR_CLOSED when `events` closes first. It listens first and reads the job's
 * state second, so a job that finished before the call is answered at once and none is missed; and it
 * reads the job again whenever the listener finds its mark was lost (a Redis that lost its data wrote no
 * event until the listener marked again).
 */
export async function waitUntilFinished(
  events: unknown,
  job: { id: string; name: string; queue: string },
  ttl: number | undefined,
  read: ReadOutcome,
): Promise<unknown> {
  if (!(events instanceof QueueEvents)) fail('ERR_OPTIONS', "expected waitUntilFinished to be given a QueueEvents of the job's queue")
  if (events.name !== job.queue) fail('ERR_OPTIONS', `expected a QueueEvents of queue ${job.queue}, got one of queue ${events.name}`)
  if (ttl !== undefined) checkInteger('ttl', ttl, { min: 1, max: 2 ** 31 - 1, unit: 'ms' })
  await events.waitUntilReady()
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined
    let unwatch: () => void = () => undefined
    let settled = false
    const settle = (fn: () => void) => {
      if (settled) return
      settled = true
      unwatch()
      clearTimeout(timer)
      fn()
    }
    const failed = (reason: string) => settle(() => reject(new EchoMQError('ERR_JOB_FAILED', reason)))
    const check = () =>
      read().then(
        ({ state, returnValue, failedReason }) => {
          if (state === 'completed') settle(() => resolve(returnValue === undefined ? null : parseResult(returnValue)))
          else if (state === 'failed') failed(failedReason ?? 'failed')
          else if (state === undefined) {
            const message = `Missing key for job ${job.id} of queue ${job.queue}: it was removed (or removed on completion)`
            settle(() => reject(new EchoMQError('ERR_JOB_MISSING', message)))
          }
        },
        (err: unknown) => settle(() => reject(redisError(job.queue, `read job ${job.id} of queue`, err))),
      )
    unwatch = events.watchJob(job.id, {
      finished: (event, data) =>
        event === 'completed' ? settle(() => resolve(data.returnvalue)) : failed(String(data.failedReason ?? 'failed')),
      markedAgain: check,
      closing: () =>
        settle(() => reject(new EchoMQError('ERR_CLOSED', `queue events of ${job.queue} closed before job ${job.id} finished`))),
    })
    if (ttl !== undefined && !settled) {
      const message = `Job wait ${job.name} timed out before finishing, no finish notification arrived after ${ttl}ms (id=${job.id})`
      timer = setTimeout(() => settle(() => reject(new EchoMQError('ERR_TIMEOUT', message))), ttl)
    }
    if (!settled) void check()
  })
}

function parseResult(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}
