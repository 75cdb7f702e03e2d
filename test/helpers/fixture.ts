/**
 * The shared fixture of the tests that drive a queue and its workers: a Queue on the test's Redis made
 * before each test, and `worker(processor, options)` making Workers with the file's defaults (short
 * leases) that are closed after each test. Register it after useRedis (whose flush runs first).
 */
import { afterEach, beforeEach } from 'vitest'
import { type Job, Queue, type QueueOptions, Worker, type WorkerOptions } from '../../lib/index.js'
import { type QueueKeys, queueKeys } from '../../lib/redis/keys.js'
import type { TestRedis } from './redis-server.js'

export interface QueueFixture {
  /** The queue of the current test (options.name, default 'q'; prefix emq; on the test's Redis client). */
  readonly queue: Queue
  readonly keys: QueueKeys
  /** A Worker of the queue with the fixture's defaults, over `options`; closed after the test. */
  worker(processor: (job: Job, token: string, signal: AbortSignal) => unknown, options?: WorkerOptions): Worker
}

export interface FixtureOptions {
  /** The queue's name (default 'q'), for tests that speak of a named queue ('emails'). */
  name?: string
  /** The queue's own options (limits, default job options); its connection is always the test's client. */
  queue?: Omit<QueueOptions, 'connection'>
  /** Worker options every worker gets (leases, timeouts); a worker's own options win. */
  workers?: WorkerOptions
  /** Where workers connect (default: the test Redis's URL); a function, for a proxy made per test. */
  connection?: () => string
  /** What to do with a worker's `error` events (default: none attached, so they are printed). */
  onError?: (err: unknown) => void
  /** How a worker is closed after each test (default: close()). */
  close?: (worker: Worker) => Promise<unknown>
}

export function useQueue(server: TestRedis | (() => TestRedis), options: FixtureOptions = {}): QueueFixture {
  const redis = () => (typeof server === 'function' ? server() : server)
  const name = options.name ?? 'q'
  let queue: Queue | undefined
  const workers: Worker[] = []
  beforeEach(() => {
    queue = new Queue(name, { ...options.queue, connection: redis().client })
  })
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => (options.close ? options.close(w) : w.close())))
  })
  return {
    get queue(): Queue {
      if (!queue) throw new Error('the queue fixture is made before each test')
      return queue
    },
    keys: queueKeys('emq', name),
    worker(processor, own = {}) {
      const connection = options.connection ? options.connection() : redis().url
      const w = new Worker(name, processor, { connection, ...options.workers, ...own })
      if (options.onError) w.on('error', options.onError)
      workers.push(w)
      return w
    },
  }
}

/** The fixture of tests that read several queues (the CLI's, the dashboard's, the reaper's). */
export interface QueuesFixture {
  /** A Queue of this name on the test's Redis client; closed after the test. Unlike useQueue, none is made by itself. */
  open(name: string): Queue
  /** A Worker of queue `name`, on the test's Redis URL unless `options` say otherwise; closed after the test. */
  worker(name: string, processor: (job: Job, token: string, signal: AbortSignal) => unknown, options?: WorkerOptions): Worker
}

/**
 * Queues and workers of any name on the test's Redis, for tests that read several: the registry holds only
 * the queues a test opens. After each test its workers are closed, then its queues.
 */
export function useQueues(server: TestRedis | (() => TestRedis)): QueuesFixture {
  const redis = () => (typeof server === 'function' ? server() : server)
  const opened: Queue[] = []
  const workers: Worker[] = []
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()))
    await Promise.all(opened.splice(0).map((q) => q.close()))
  })
  return {
    open(name) {
      const queue = new Queue(name, { connection: redis().client })
      opened.push(queue)
      return queue
    },
    worker(name, processor, options = {}) {
      const w = new Worker(name, processor, { connection: redis().url, ...options })
      workers.push(w)
      return w
    },
  }
}

/**
 * For tests that build what the fixtures cannot (a client on a Redis they stop, a bad connection):
 * `track(x)` closes x after the test, the last tracked first.
 */
export function useClosing(): <T extends { close(): Promise<unknown> }>(x: T) => T {
  const closers: (() => Promise<unknown>)[] = []
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close()
  })
  return (x) => {
    closers.push(() => x.close())
    return x
  }
}
