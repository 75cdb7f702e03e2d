/**
 * Builds in-flight state quickly for both libraries, with each library's own scripts:
 * EchoMQ: Queue.add (many in flight at once, so they share round trips), then the take script in batches
 * of 500, as test/helpers/queue-state.ts does. BullMQ: Queue.addBulk, then its moveToActive script (the
 * backend call a Worker's getNextJob makes) with a lock token, many in flight at once.
 */
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import type { Redis } from 'ioredis'
import { Queue } from '../lib/index.js'
import { queueKeys } from '../lib/keys.js'
import { runScript, scripts } from '../lib/scripts.js'

export const EMQ_PREFIX = 'emq'
export const BULL_PREFIX = 'bull'
const CHUNK = 500

export interface Held {
  id: string
  token: string
}

async function inChunks<T>(items: T[], size: number, fn: (chunk: T[]) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await fn(items.slice(i, i + size))
}

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i)

/** Adds jobs `j<from>` .. `j<to - 1>` to an EchoMQ queue. */
export async function emqAdd(client: Redis, queue: string, from: number, to: number): Promise<void> {
  const q = new Queue(queue, { connection: client, prefix: EMQ_PREFIX })
  await inChunks(range(from, to), CHUNK, async (chunk) => {
    await Promise.all(chunk.map((i) => q.add('job', { i }, { jobId: `j${i}` })))
  })
  await q.close()
}

/** Takes `n` jobs from the tail of `wait` with a lease of `leaseMs`, as a worker with id `worker` would. */
export async function emqTake(client: Redis, queue: string, n: number, leaseMs: number, worker: string): Promise<Held[]> {
  const keys = queueKeys(EMQ_PREFIX, queue)
  const held: Held[] = []
  while (held.length < n) {
    const ids = (await client.lrange(keys.wait, -Math.min(CHUNK, n - held.length), -1)).reverse()
    if (ids.length === 0) throw new Error(`emqTake: wait of ${queue} is empty after ${held.length} of ${n}`)
    const reply = (await runScript(
      client,
      scripts.take(),
      [keys.wait, keys.active, keys.marker, ...ids.flatMap((id) => [keys.job(id), keys.lock(id)])],
      [worker, leaseMs, ...ids],
    )) as [string, string, string[]][]
    for (const [id, token] of reply) held.push({ id, token })
  }
  return held
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
