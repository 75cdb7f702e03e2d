/**
 * What Queue, Worker and QueueEvents say and how long they take when Redis is not there (found by the
 * outside trial, each reproduced here first): a wrong password named alike by all three (where the
 * connection goes, password masked, nowhere in a message or a cause), Worker.waitUntilReady() on a dead
 * port bounded, queue.close() bounded with Redis stopped or gone and no acknowledged write lost, and
 * worker.close() with Redis gone while a job ends not held by ioredis's reconnects past the job's lease.
 */
import { inspect } from 'node:util'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { type EchoMQError, Queue, QueueEvents, Worker } from '../../lib/index.js'
import { QUIT_TIMEOUT_MS } from '../../lib/redis/connection.js'
import { READY_TIMEOUT_MS } from '../../lib/redis/connection-failure.js'
import { type DurableRedis, startDurableRedis } from '../chaos/durable-redis.js'
import { useClosing } from '../helpers/fixture.js'
import { freePort, startRedis, useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const track = useClosing()
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

describe('worker.close() with Redis gone while a job ends (no closeTimeout: BullMQ waits for the job)', () => {
  let durable: DurableRedis | undefined
  afterEach(async () => {
    await durable?.destroy()
    durable = undefined
  })

  /** A worker running one job, held until `release()`; Redis (durable: it can come back with its data) under it. */
  async function runningJob(lockDuration: number) {
    durable = await startDurableRedis()
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    // direct: a queue on a Redis this test stops and starts
    const queue = track(new Queue('q', { connection: durable.url }))
    // direct: a worker on a Redis this test stops and starts
    const worker = new Worker('q', () => gate.then(() => 'done'), { connection: durable.url, lockDuration, skipStalledCheck: true })
    const errors: EchoMQError[] = []
    worker.on('error', (err) => errors.push(err as EchoMQError))
    const job = await queue.add('job', {})
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'active', { what: 'the job to start' })
    return { queue, worker, job, errors, release }
  }

  it('stops reconnecting once the lease of the finished job lapsed (was ~30 s of reconnects), and says the sweep recovers it', async () => {
    const { worker, job, errors, release } = await runningJob(1_000)
    await durable?.stop('SIGKILL')
    const started = performance.now()
    const closing = worker.close()
    release()
    await closing
    const took = performance.now() - started
    expect(took).toBeLessThan(1_000 + 1_500)
    const said = errors.map((e) => e.message).find((m) => /closed before Redis answered/.test(m))
    expect(said).toMatch(/1 finished job\(s\) not recorded: Redis was unreachable until their leases lapsed.*stalled sweep recovers them/)
    // Redis back: the job was not finished by the closed worker (its finish never reached Redis); the sweep recovers it.
    await durable?.start()
    const client = new Redis(durable?.port ?? 0)
    try {
      expect(await client.hget(`emq:{q}:${job.id}`, 'state')).toBe('active')
      expect(await client.zscore('emq:{q}:active', job.id)).not.toBeNull()
    } finally {
      client.disconnect()
    }
  })

  it('still records the job when Redis comes back within its lease', async () => {
    const { queue, worker, job, release } = await runningJob(8_000)
    await durable?.stop('SIGKILL')
    const closing = worker.close()
    release()
    await durable?.start()
    await closing
    expect(await queue.getJob(job.id)).toMatchObject({ state: 'completed', returnValue: 'done' })
  })
})

describe('queue.close() with Redis stopped or gone', () => {
  it('returns within QUIT_TIMEOUT_MS (2 s) of a stopped Redis, keeping every write it acknowledged', async () => {
    const own = await startRedis()
    try {
      // direct: a queue on a Redis this test stops
      const queue = new Queue('q', { connection: own.url })
      const acked = await queue.addBulk(Array.from({ length: 50 }, (_, i) => ({ name: 'job', data: { i } })))
      own.process.kill('SIGSTOP')
      const late = queue.add('late', {}).catch((e: unknown) => e)
      const started = performance.now()
      await queue.close()
      const took = performance.now() - started
      expect(took).toBeLessThan(QUIT_TIMEOUT_MS + 500)
      // Not acknowledged: ERR_CLOSED (it may still be applied, as docs/connections.md says).
      expect(await late).toMatchObject({ code: 'ERR_CLOSED' })
      own.process.kill('SIGCONT')
      const ids = await own.client.lrange('emq:{q}:wait', 0, -1)
      for (const job of acked) expect(ids).toContain(job.id)
    } finally {
      own.process.kill('SIGCONT')
      await own.stop()
    }
  })

  it('returns at once when Redis is gone (no wait on reconnects), failing the calls still waiting', async () => {
    const own = await startRedis()
    // direct: a queue on a Redis this test kills
    const queue = new Queue('q', { connection: own.url })
    await queue.add('job', {})
    await own.stop()
    const waiting = queue.add('late', {}).catch((e: unknown) => e)
    const started = performance.now()
    await queue.close()
    expect(performance.now() - started).toBeLessThan(500)
    expect(await waiting).toMatchObject({ code: 'ERR_CLOSED' })
  })
})

describe('queueEvents.close() with Redis gone', () => {
  // Called 0 to 600 ms after Redis went, close() never returned: the read loop's command waited in ioredis
  // for a reconnect that the close had cancelled.
  for (const afterMs of [0, 200, 600]) {
    it(`returns within its bounds when called ${afterMs} ms after Redis went`, async () => {
      const own = await startRedis()
      // direct: queue events on a Redis this test kills
      const events = new QueueEvents('q', { connection: own.url, blockingTimeout: 200 })
      await events.waitUntilReady()
      await own.stop()
      if (afterMs > 0) await new Promise((resolve) => setTimeout(resolve, afterMs))
      const started = performance.now()
      await events.close()
      expect(performance.now() - started).toBeLessThan(QUIT_TIMEOUT_MS + 1_500)
    })
  }
})

describe('an outage, as Queue and QueueEvents report it', () => {
  it('once each (ioredis errs on every reconnect), as ERR_CONNECTION naming the refusal and where', async () => {
    const own = await startRedis()
    // direct: a queue and queue events on a Redis this test stops and starts
    const queue = track(new Queue('q', { connection: own.url }))
    // direct: as above
    const events = track(new QueueEvents('q', { connection: own.url, blockingTimeout: 200 }))
    const queueErrors: EchoMQError[] = []
    const eventErrors: EchoMQError[] = []
    queue.on('error', (err) => queueErrors.push(err as EchoMQError))
    events.on('error', (err) => eventErrors.push(err as EchoMQError))
    await events.waitUntilReady()
    await queue.add('job', {})
    let refusals = 0
    queue.client.on('error', () => refusals++)
    await own.stop()
    // Several failed reconnects of the queue's client, and a failed read of the events' (past its retries).
    await waitFor(() => refusals >= 3 && eventErrors.length > 0, { what: 'three failed reconnects and a failed read' })
    expect(queueErrors).toHaveLength(1)
    expect(eventErrors).toHaveLength(1)
    for (const err of [...queueErrors, ...eventErrors]) {
      expect(err).toMatchObject({ name: 'EchoMQError', code: 'ERR_CONNECTION' })
      expect(err.message).toMatch(/ECONNREFUSED|ECONNRESET/)
      expect(err.message).toContain(`(Redis at ${own.url})`)
      expect(err.message).not.toMatch(/max retries/)
    }
  })
})
