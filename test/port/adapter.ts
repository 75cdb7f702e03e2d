/**
 * The one import point of the ported BullMQ tests (issue 30): either library's classes under BullMQ 6.7's
 * types, and a per-test fixture (a fresh queue name on the file's own redis-server, workers, listeners and
 * flow producers closed after each test). A ported case runs once per library, so a case that fails on
 * BullMQ is a wrong port, and one that fails on EchoMQ is a difference a BullMQ program would meet.
 *
 * EchoMQ is typed here as BullMQ: the port is a BullMQ program whose import changed. Where EchoMQ differs on
 * purpose, the difference is named below (`differs`), with the page that documents it; no assertion is
 * loosened for EchoMQ, the expected value is EchoMQ's documented one.
 */
import * as bullmq from 'bullmq'
import { afterEach, beforeEach, expect } from 'vitest'
import * as echomq from '../../lib/index.js'
import type { TestRedis } from '../helpers/redis-server.js'

export type LibName = 'bullmq' | 'echomq'

/** What a BullMQ program imports; for EchoMQ the same names, read from lib/index.ts. */
type Lib = Pick<
  typeof bullmq,
  'Queue' | 'Worker' | 'QueueEvents' | 'FlowProducer' | 'Job' | 'DelayedError' | 'WaitingChildrenError' | 'UnrecoverableError'
>

/** Every ported file runs its cases on each of these. */
export const LIBRARIES: LibName[] = ['bullmq', 'echomq']

/** The libraries the flow ports (flow*.test.ts) run on: both, as every other port. */
export const FLOW_LIBRARIES: LibName[] = ['bullmq', 'echomq']

function echoLib(): Lib {
  // FlowProducer and WaitingChildrenError are read by name: EchoMQ exports them only once flows land.
  const names = echomq as unknown as Record<string, unknown>
  return {
    Queue: echomq.Queue,
    Worker: echomq.Worker,
    QueueEvents: echomq.QueueEvents,
    Job: echomq.Job,
    DelayedError: echomq.DelayedError,
    UnrecoverableError: echomq.UnrecoverableError,
    FlowProducer: names.FlowProducer,
    WaitingChildrenError: names.WaitingChildrenError,
  } as unknown as Lib
}

function library(name: LibName): Lib {
  return name === 'bullmq' ? bullmq : echoLib()
}

/**
 * Where EchoMQ differs from BullMQ 6.7 on purpose, as a port case meets it. Each entry names the page that
 * documents it; a case asserts the value of the library it runs on.
 */
export const differs = {
  /**
   * A call on a job that no longer exists. BullMQ: `Missing key for job <id>. <method>`; EchoMQ: an
   * EchoMQError with code ERR_JOB_MISSING naming the job (docs/changing-jobs.md: "a refused call throws an
   * EchoMQError with a code").
   */
  async missingJob(lib: LibName, call: Promise<unknown>, id: string, method: string): Promise<void> {
    await differs.refused(lib, call, `Missing key for job ${id}. ${method}`, { code: 'ERR_JOB_MISSING', mentions: `job ${id} ` })
  },
  /**
   * Any refused call: BullMQ's exact message; EchoMQ's code (the one its docs give for the case: ERR_JOB_MISSING
   * for a job that is gone, ERR_JOB_ACTIVE for removing one in flight, docs/migrating-from-bullmq-queue.md;
   * ERR_LOCK_LOST, ERR_JOB_STATE, docs/changing-jobs.md; any code where no page names one yet) and a message
   * that names what was refused.
   */
  async refused(lib: LibName, call: Promise<unknown>, bullmqMessage: string, echomq: { code?: string; mentions: string }): Promise<void> {
    const err = (await call.then(
      () => undefined,
      (e: unknown) => e,
    )) as (Error & { code?: string }) | undefined
    expect(err, 'the call must reject').toBeInstanceOf(Error)
    if (lib === 'bullmq') expect(err?.message).toBe(bullmqMessage)
    else {
      // A refusal no EchoMQ page names a code for yet (flows) is any EchoMQError code.
      if (echomq.code) expect(err?.code).toBe(echomq.code)
      else expect(err?.code).toMatch(/^ERR_[A-Z_]+$/)
      expect(err?.message).toContain(echomq.mentions)
    }
  },
  /**
   * A finished job past its retention's `age`: BullMQ removes it at the queue's next finish; EchoMQ keeps
   * "jobs past the age until the next trim or sweep; after a sweep of the queue the limits hold exactly"
   * (docs/guide.md, "Retention").
   */
  ageTrimsAtFinish: (lib: LibName): boolean => lib === 'bullmq',
  /**
   * `job.retry(state, { resetAttemptsStarted: true })`: BullMQ counts the job's starts from 0 again; EchoMQ
   * refuses it with ERR_OPTIONS ("each run's token is numbered by its start, so that count goes on",
   * docs/migrating-from-bullmq.md, "Retrying a job").
   */
  resetsAttemptsStarted: (lib: LibName): boolean => lib === 'bullmq',
  /**
   * The `timestamp` and `sizeLimit` job options: BullMQ takes them; EchoMQ refuses both with ERR_OPTIONS ("a
   * job's creation time is Redis's clock"; "maxDataBytes on the Queue bounds data", docs/migrating-from-bullmq-queue.md).
   */
  takesTimestamp: (lib: LibName): boolean => lib === 'bullmq',
  takesSizeLimit: (lib: LibName): boolean => lib === 'bullmq',
  /**
   * `jobId: ''`: BullMQ leaves it out (a numeric id); EchoMQ refuses it, ERR_JOB_ID ("1-256 characters",
   * docs/migrating-from-bullmq-queue.md, "Job ids").
   */
  emptyJobIdIgnored: (lib: LibName): boolean => lib === 'bullmq',
  // Flows: docs/flows.md, "Differences from BullMQ 6.7".
  /** A childless flow root may take `deduplication` (BullMQ); EchoMQ refuses it on every flow node. */
  flowRootDeduplicates: (lib: LibName): boolean => lib === 'bullmq',
  /** A job that ends with children still pending: BullMQ fails it ("pending dependencies"), EchoMQ completes it. */
  pendingChildrenFailParent: (lib: LibName): boolean => lib === 'bullmq',
  /** A child given a second parent: EchoMQ's ERR_JOB_STATE names the child; BullMQ's message the new parent. */
  secondParentRefusal: (lib: LibName, child: string, parentKey: string): { code?: string; mentions: string } =>
    lib === 'bullmq' ? { mentions: parentKey } : { code: 'ERR_JOB_STATE', mentions: child },
}

type AnyJob = bullmq.Job
type Processor = (job: AnyJob, token?: string) => unknown

export interface Port {
  readonly lib: Lib
  readonly name: LibName
  /** This test's queue name (fresh per test). */
  readonly queueName: string
  /** A Queue of this test's queue, made before each test. */
  readonly queue: bullmq.Queue
  /** Connection options for the file's redis-server, for whatever the test makes itself. */
  readonly connection: { host: string; port: number }
  /** A Queue of another name (a flow's child queue; under `prefix` when given), closed after the test. */
  queueOf(name: string, prefix?: string): bullmq.Queue
  /** A Worker with short leases, closed after the test; its `error` events are kept in `errors`. */
  worker(processor: Processor, options?: Partial<bullmq.WorkerOptions> & { queueName?: string }): bullmq.Worker
  /** A QueueEvents reading the queue's stream from its start, ready when it resolves; closed after the test. */
  events(queueName?: string): Promise<bullmq.QueueEvents>
  /** A FlowProducer (with `prefix` when given), closed after the test. */
  flow(prefix?: string): bullmq.FlowProducer
  /** The `error` events of the test's workers. */
  readonly errors: unknown[]
}

let made = 0

/** The per-test fixture of one library on the file's redis-server (useRedis, registered before this). */
export function usePort(redis: TestRedis, name: LibName): Port {
  const lib = library(name)
  const closers: (() => Promise<unknown>)[] = []
  const workers: bullmq.Worker[] = []
  const errors: unknown[] = []
  let queue: bullmq.Queue | undefined
  let queueName = ''
  const connection = () => ({ host: '127.0.0.1', port: redis.port })
  const queueOf = (qName: string, prefix?: string) => {
    // direct: the port's own fixture, for either library (test/helpers/fixture.ts makes EchoMQ's only)
    const q = new lib.Queue(qName, { connection: connection(), ...(prefix ? { prefix } : {}) })
    closers.push(() => q.close())
    return q
  }
  beforeEach(() => {
    made++
    queueName = `port${made}`
    errors.length = 0
    queue = queueOf(queueName)
  })
  afterEach(async () => {
    // Workers first (they finish their runs on the queue), then whatever else the test opened.
    await Promise.all(workers.splice(0).map((w) => w.close()))
    await Promise.all(closers.splice(0).map((close) => close()))
  })
  return {
    lib,
    name,
    errors,
    get queueName() {
      return queueName
    },
    get queue(): bullmq.Queue {
      if (!queue) throw new Error('the port fixture makes its queue before each test')
      return queue
    },
    get connection() {
      return connection()
    },
    queueOf,
    worker(processor, { queueName: qName, ...options } = {}) {
      // Short leases (BullMQ's lockRenewTime and EchoMQ's heartbeat both default to a fraction of it).
      // direct: the port's own fixture, for either library
      const w = new lib.Worker(qName ?? queueName, processor as bullmq.Processor, {
        connection: connection(),
        lockDuration: 600,
        ...options,
      })
      w.on('error', (err) => errors.push(err))
      workers.push(w)
      return w
    },
    async events(qName) {
      // From the stream's start: BullMQ's waitUntilReady resolves before its first XREAD, so '$' could miss
      // what the test does next (docs/migrating-from-bullmq.md, `QueueEvents.waitUntilReady()`). Each test's
      // queue is new, so its stream holds only this test's events.
      const events = new lib.QueueEvents(qName ?? queueName, { connection: connection(), lastEventId: '0-0', blockingTimeout: 200 })
      closers.push(() => events.close())
      await events.waitUntilReady()
      return events
    },
    flow(prefix) {
      const producer = new lib.FlowProducer({ connection: connection(), ...(prefix ? { prefix } : {}) })
      closers.push(() => producer.close())
      return producer
    },
  }
}

/** Resolves once `count` calls of the returned listener have been made, or rejects after `timeoutMs`. */
export function counted<T extends unknown[]>(
  count: number,
  timeoutMs = 10_000,
): { listener: (...args: T) => void; calls: T[]; done: Promise<T[]> } {
  const calls: T[] = []
  let resolve: (v: T[]) => void = () => undefined
  let reject: (e: Error) => void = () => undefined
  const done = new Promise<T[]>((res, rej) => {
    resolve = res
    reject = rej
  })
  const timer = setTimeout(
    () => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${count} calls (got ${calls.length})`)),
    timeoutMs,
  )
  return {
    calls,
    done,
    listener: (...args: T) => {
      calls.push(args)
      if (calls.length === count) {
        clearTimeout(timer)
        resolve(calls)
      }
    },
  }
}

/**
 * Resolves once `events` has delivered everything the queue's stream held when called: it adds a marker job
 * (`jobId` 'settled') and waits for its `added` event, which comes after every earlier event. For a case that
 * counts events ("exactly two deduplicated"): call it after the counts of jobs, since it adds one.
 */
export async function settled(events: bullmq.QueueEvents, queue: bullmq.Queue): Promise<void> {
  const seen = first<{ jobId: string }>()
  const listener = (args: { jobId: string }) => {
    if (args.jobId === 'settled') seen.listener(args)
  }
  events.on('added', listener)
  try {
    await queue.add('settled', {}, { jobId: 'settled' })
    await seen.value
  } finally {
    events.off('added', listener)
  }
}

/** Resolves to the first argument of the first call of the returned listener, or rejects after `timeoutMs`. */
export function first<A>(timeoutMs = 10_000): { listener: (arg: A, ...rest: unknown[]) => void; value: Promise<A> } {
  const { listener, done } = counted<[A]>(1, timeoutMs)
  return { listener: (arg) => listener(arg), value: done.then((calls) => (calls[0] as [A])[0]) }
}

/**
 * Waits until `ms` have passed since `since` (performance.now()): the gap in time a case is about (a ttl or a
 * delay running out), not a wait for something to happen.
 */
export async function until(since: number, ms: number): Promise<void> {
  const left = since + ms - performance.now()
  if (left > 0) await new Promise((resolve) => setTimeout(resolve, left))
}

/**
 * A gate a processor waits at until the test opens it: a job held in `active` while the case acts. It opens
 * by itself after `timeoutMs`, so a failed case does not leave its worker's close() waiting.
 */
export function gate(timeoutMs = 10_000): { open: () => void; passed: Promise<void> } {
  let open: () => void = () => undefined
  const passed = new Promise<void>((resolve) => {
    open = resolve
  })
  const timer = setTimeout(open, timeoutMs)
  return {
    passed,
    open: () => {
      clearTimeout(timer)
      open()
    },
  }
}

/** A processor's run that lasts `ms`: a job's duration, not a wait for something to happen. */
export const runFor = (ms: number): Promise<void> => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Where assertions made inside listeners and processors are kept, to be checked after the case awaited. */
export function collector(): { failures: unknown[]; check(fn: () => void): void } {
  const failures: unknown[] = []
  return {
    failures,
    check(fn: () => void) {
      try {
        fn()
      } catch (e) {
        failures.push(e)
      }
    },
  }
}
