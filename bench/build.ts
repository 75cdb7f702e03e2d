/**
 * Builds in-flight state quickly for both libraries, with each library's own scripts:
 * EchoMQ: cli/support/crashed-state.ts's addJobs and holdJobs, the builder the race and the tests use.
 * BullMQ: Queue.addBulk, then its moveToActive script (the backend call a Worker's getNextJob makes) with a
 * lock token, many in flight at once.
 */
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import type { Redis } from 'ioredis'
import { addJobs, holdJobs } from '../cli/support/crashed-state.js'
import { type JobOptions, Queue } from '../lib/queue.js'

export const EMQ_PREFIX = 'emq'
export const BULL_PREFIX = 'bull'
const CHUNK = 500

import type { Lease as Held } from '../lib/redis/commands.js'

export type { Held }

async function inChunks<T>(items: T[], size: number, fn: (chunk: T[]) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await fn(items.slice(i, i + size))
}

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i)

/** Adds jobs `j<from>` .. `j<to - 1>` to an EchoMQ queue. */
export async function emqAdd(client: Redis, queue: string, from: number, to: number): Promise<void> {
  await addJobs(
    client,
    queue,
    range(from, to).map((i) => `j${i}`),
    { prefix: EMQ_PREFIX },
  )
}

/** Jobs added at once by emqAddMany. */
const ADDS_IN_FLIGHT = 200

/**
 * Adds `n` jobs with data `dataOf(i)` through Queue.add (random ids), with the queue's `defaultJobOptions`
 * (none: EchoMQ's defaults, retention included), ADDS_IN_FLIGHT at a time. `add` is called once per job,
 * so a caller may time each add.
 */
export async function emqAddMany(
  client: Redis,
  queue: string,
  n: number,
  {
    defaultJobOptions,
    dataOf = (i: number) => ({ i }),
    options,
  }: {
    defaultJobOptions?: Omit<JobOptions, 'jobId'>
    dataOf?: (i: number) => unknown
    options?: (i: number) => JobOptions
  } = {},
): Promise<void> {
  const q = new Queue(queue, { connection: client, prefix: EMQ_PREFIX, ...(defaultJobOptions ? { defaultJobOptions } : {}) })
  for (let i = 0; i < n; i += ADDS_IN_FLIGHT) {
    await Promise.all(range(i, Math.min(n, i + ADDS_IN_FLIGHT)).map((j) => q.add('job', dataOf(j), options?.(j))))
  }
  await q.close()
}

/** Adds `n` jobs with data `dataOf(i)` to a BullMQ queue with addBulk, 1000 at a time. */
export async function bullAddMany(queue: BullQueue, n: number, dataOf: (i: number) => unknown = (i) => ({ i })): Promise<void> {
  await inChunks(range(0, n), 1000, async (chunk) => {
    await queue.addBulk(chunk.map((i) => ({ name: 'job', data: dataOf(i) })))
  })
}

/** Takes `n` jobs from the tail of `wait` with a lease of `leaseMs`, as a worker with id `worker` would. */
export function emqTake(client: Redis, queue: string, n: number, leaseMs: number, worker: string): Promise<Held[]> {
  return holdJobs(client, queue, n, { prefix: EMQ_PREFIX, leaseMs, workerToken: worker })
}

export interface BullState {
  queue: BullQueue
  /** A Worker that does not run (autorun false): its backend runs the scripts. */
  worker: BullWorker
  held: Held[]
}

export function bullConnection(host: string, port: number) {
  return { host, port, maxRetriesPerRequest: null }
}

/** Adds `n` jobs to a BullMQ queue and moves them to active with a lock; token of job i is tokenOf(i). */
export async function bullActive(host: string, port: number, name: string, n: number, tokenOf: (i: number) => string): Promise<BullState> {
  const connection = bullConnection(host, port)
  const queue = new BullQueue(name, { connection, prefix: BULL_PREFIX })
  const worker = new BullWorker(name, null, { connection, prefix: BULL_PREFIX, autorun: false })
  worker.on('error', () => undefined)
  await queue.waitUntilReady()
  await worker.waitUntilReady()
  await inChunks(range(0, n), 1000, async (chunk) => {
    await queue.addBulk(chunk.map((i) => ({ name: 'job', data: { i } })))
  })
  const held: Held[] = []
  await inChunks(range(0, n), CHUNK, async (chunk) => {
    const replies = await Promise.all(chunk.map((i) => worker.backend.moveToActive(tokenOf(i)).then((r) => ({ r, token: tokenOf(i) }))))
    for (const { r, token } of replies) {
      const id = r[1] as string | undefined
      if (!id) throw new Error('bullActive: moveToActive returned no job')
      held.push({ id: String(id), token })
    }
  })
  return { queue, worker, held }
}

export async function closeBull(state: BullState): Promise<void> {
  await state.worker.close()
  await state.queue.close()
}

export const bullKey = (queue: string, suffix: string) => `${BULL_PREFIX}:${queue}:${suffix}`
