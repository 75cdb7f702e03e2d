/**
 * QueueEvents across a Redis that lost its data: a redis-server without persistence killed (SIGKILL) and
 * started again on the same port, or the listener's mark deleted under it. The listener marks its presence
 * again as soon as it reconnects (not at its next refresh), so the scripts write events again at once; a
 * waitUntilFinished whose job finished while nobody was marked re-reads the job then, instead of waiting
 * for an event that was never written.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { type Job, Queue, QueueEvents, Worker } from '../../lib/index.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { type DurableRedis, startDurableRedis } from '../chaos/durable-redis.js'
import { TcpProxy } from '../chaos/proxy.js'
import { waitFor } from '../helpers/wait.js'

const keys = queueKeys('emq', 'q')
let server: DurableRedis
const closing: (() => Promise<unknown>)[] = []

beforeAll(async () => {
  server = await startDurableRedis({ persist: false })
})
afterAll(async () => {
  await server?.destroy()
})
afterEach(async () => {
  vi.restoreAllMocks()
  for (const close of closing.splice(0).reverse()) await close().catch(() => undefined)
  if (!server.running) await server.start()
  // direct: on a server this test kills and restarts, not the fixture's Redis
  const admin = new Queue('q', { connection: server.url })
  await admin.client.flushall()
  await admin.close()
})

function open<T extends { close(): Promise<unknown>; on?(event: 'error', fn: () => void): unknown }>(thing: T): T {
  thing.on?.('error', () => undefined) // the restart fails calls in flight: expected here
  closing.push(() => thing.close())
  return thing
}

async function listen(url: string, blockingTimeout = 200): Promise<QueueEvents> {
  const events = open(new QueueEvents('q', { connection: url, blockingTimeout }))
  await events.waitUntilReady()
  return events
}

/** The server killed as a crash kills it, and started again with nothing. */
async function restartEmpty(): Promise<void> {
  await server.stop('SIGKILL')
  await server.start()
}

describe('a running QueueEvents across a Redis restarted empty', () => {
  it('marks again on reconnecting: jobs added after the restart are heard, their waitUntilFinished resolve', async () => {
    // The default blocking timeout: the read in flight across the restart blocks for up to 10 s after it.
    const events = await listen(server.url, 10_000)
    const heard = new Set<string>()
    events.on('completed', ({ jobId }: { jobId: string }) => heard.add(jobId))
    // direct: on a server this test kills and restarts, not the fixture's Redis
    const queue = open(new Queue('q', { connection: server.url }))
    await restartEmpty()

    // Long before the 20 s refresh: the reconnect itself marks again.
    await waitFor(async () => (await queue.client.exists(keys.listened)) === 1, { timeoutMs: 10_000, what: 'the mark set again' })
    // direct: on a server this test kills and restarts, not the fixture's Redis
    open(new Worker('q', async (job: Job) => `done ${job.id}`, { connection: server.url }))
    const jobs = await Promise.all(Array.from({ length: 32 }, (_, i) => queue.add('x', {}, { jobId: `j${i}` })))
    const results = await Promise.all(jobs.map((job) => job.waitUntilFinished(events, 10_000)))
    expect(results).toEqual(jobs.map((job) => `done ${job.id}`))
    await waitFor(() => heard.size === 32, { what: 'every completion heard' })
  })

  it('a job that finished before the listener could mark again is answered by re-reading it', async () => {
    // The listener reaches Redis through a proxy held shut, so it cannot mark until the job is done.
    const proxy = await TcpProxy.start(server.port)
    closing.push(() => proxy.close())
    const events = await listen(proxy.url)
    // direct: on a server this test kills and restarts, not the fixture's Redis
    const queue = open(new Queue('q', { connection: server.url }))
    proxy.refuse()
    await restartEmpty()

    const job = await queue.add('x', {}, { jobId: 'gap' })
    const finished = job.waitUntilFinished(events, 10_000)
    // direct: on a server this test kills and restarts, not the fixture's Redis
    open(new Worker('q', async () => 'made it', { connection: server.url }))
    await waitFor(async () => (await queue.getJobState('gap')) === 'completed', { what: 'the job done, unheard' })
    expect(await queue.client.exists(keys.events)).toBe(0) // nobody marked: no event written

    proxy.resume()
    await expect(finished).resolves.toBe('made it')
  })
})

describe('a mark lost without a reconnect (deleted, evicted, flushed)', () => {
  it('is found at the next refresh, which marks again and re-reads the jobs waited for', async () => {
    const events = await listen(server.url)
    // direct: on a server this test kills and restarts, not the fixture's Redis
    const queue = open(new Queue('q', { connection: server.url }))
    await queue.client.del(keys.listened)
    const job = await queue.add('x', {}, { jobId: 'lost' })
    const finished = job.waitUntilFinished(events, 10_000)
    // direct: on a server this test kills and restarts, not the fixture's Redis
    const worker = open(new Worker('q', async () => 'quietly', { connection: server.url }))
    await waitFor(async () => (await queue.getJobState('lost')) === 'completed', { what: 'the job done, unheard' })
    await worker.close()

    // The refresh is due a third of LISTEN_TTL_MS after the last mark: as if that long had passed.
    const now = performance.now.bind(performance)
    vi.spyOn(performance, 'now').mockImplementation(() => now() + 30_000)
    await expect(finished).resolves.toBe('quietly')
    expect(await queue.client.exists(keys.listened)).toBe(1)
  })
})
