/**
 * Faults found from outside, each injected the way it happens: a registry lost to a restart, a full
 * Redis (`CONFIG SET maxmemory`), a sweep daemon across a Redis restart, jobs of a megabyte. (Network
 * faults, stepped clocks and close() under a stalled link are in test/chaos/network.test.ts.)
 */
import { execFile, spawn } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { EchoMQError, type Job, Queue, Worker } from '../../lib/index.js'
import { reaperConfig } from '../../lib/reaper/config.js'
import { createReaper } from '../../lib/reaper/reaper.js'
import { TAKE_MAX_BYTES, take } from '../../lib/redis/commands.js'
import { queueKeys, registryKey } from '../../lib/redis/keys.js'
import { readCandidates } from '../../lib/redis/queries.js'
import { REGISTRATION_REFRESH_MS, registration } from '../../lib/registry.js'
import { startDurableRedis } from '../chaos/durable-redis.js'
import { startBlackhole } from '../helpers/cloudwatch-endpoint.js'
import { useQueues } from '../helpers/fixture.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { crashedJobs, holdJobs } from '../helpers/queue-state.js'
import { freePort, useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const { open, worker } = useQueues(redis)
const keys = queueKeys('emq', 'q')
const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname
const closing: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const close of closing.splice(0)) await close()
  vi.restoreAllMocks()
})

describe('a lost registry', () => {
  it('a live Queue or Worker registers again within REGISTRATION_REFRESH_MS, at one SADD per interval', async () => {
    let now = 0
    const ensure = registration(redis.client, 'emq', 'q', () => now)
    await ensure()
    await redis.client.del(registryKey('emq')) // a restart without persistence, a failover, a DEL
    now = REGISTRATION_REFRESH_MS - 1
    await ensure()
    const before = await redis.client.sismember(registryKey('emq'), 'q')
    now = REGISTRATION_REFRESH_MS
    await ensure()
    expect(before).toBe(0)
    expect(await redis.client.sismember(registryKey('emq'), 'q')).toBe(1)
  })

  it('a Worker restores its registration on its own clock', async () => {
    const clock = new ManualClock()
    const queue = open('q')
    const w = worker('q', () => 'ok', { clock })
    closing.push(() => w.close())
    await waitFor(async () => (await redis.client.sismember(registryKey('emq'), 'q')) === 1, { what: 'the first registration' })
    await redis.client.del(registryKey('emq'))

    await clock.advance(REGISTRATION_REFRESH_MS)
    await Promise.all([nextEvent(w, 'completed'), queue.add('wake', {})]) // an iteration of the worker's loop

    await waitFor(async () => (await redis.client.sismember(registryKey('emq'), 'q')) === 1, { what: 'the registration again' })
  })

  it('the reaper finds queues with jobs in flight missing from the registry, registers them again and recovers their jobs', async () => {
    const ids = await crashedJobs(redis.client, 'orders', 5)
    await redis.client.del(registryKey('emq'))
    const logs: string[] = []
    const reaper = createReaper(reaperConfig({ redisUrl: redis.url, metricsMode: 'off', graceMs: 0 }, {}), {
      log: (_level, message, fields) => logs.push(`${message} ${JSON.stringify(fields ?? {})}`),
    })
    closing.push(() => reaper.close())

    const first = await reaper.run()
    const second = await reaper.run()

    expect(first.queues.orders).toMatchObject({ marked: 5 })
    expect(second.queues.orders).toMatchObject({ recovered: 5 })
    expect(await redis.client.smembers(registryKey('emq'))).toEqual(['orders'])
    expect(logs.some((l) => /missing from the registry.*orders/.test(l))).toBe(true)
    for (const id of ids) expect(await open('orders').getJob(id)).toMatchObject({ state: 'wait' })
  })
})

describe('a full Redis (maxmemory reached, noeviction)', () => {
  /** Memory in use past maxmemory (set below what the server uses): every write is refused. */
  async function fill(): Promise<void> {
    await redis.client.config('SET', 'maxmemory-policy', 'noeviction')
    await redis.client.config('SET', 'maxmemory', '1')
  }
  afterEach(async () => {
    await redis.client.config('SET', 'maxmemory', '0')
  })

  it('add() fails with ERR_OOM saying so, the sweep through the reaper logs ERR_OOM for the queue, and nothing changes', async () => {
    await crashedJobs(redis.client, 'q', 1)
    await fill()
    const queue = open('q')
    const before = await snapshot(redis.client)
    const logs: { level: string; message: string; fields?: Record<string, unknown> }[] = []
    const reaper = createReaper(reaperConfig({ redisUrl: redis.url, metricsMode: 'off', graceMs: 0, queues: ['q'] }, {}), {
      log: (level, message, fields) => logs.push({ level, message, fields: fields as Record<string, unknown> }),
    })
    closing.push(() => reaper.close())

    const err = await queue.add('job', {}).catch((e: unknown) => e)
    const summary = await reaper.run()

    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe('ERR_OOM')
    expect((err as Error).message).toMatch(/out of memory.*cannot mark stalled jobs/)
    expect(summary.queues.q?.error).toMatch(/out of memory/)
    expect(logs.find((l) => l.level === 'error')?.fields).toMatchObject({ errorCode: 'ERR_OOM' })
    expect(await snapshot(redis.client)).toEqual(before)
  })

  it("the operator's reads still answer: counts (whose MULTI a full Redis refuses), getJobs, echomq stats and jobs", async () => {
    await crashedJobs(redis.client, 'q', 2)
    const queue = open('q')
    await queue.add('waiting', {})
    await fill()
    expect(await queue.counts()).toMatchObject({ wait: 1, active: 2 })
    expect(await queue.getJobs('active')).toHaveLength(2)
    const run = promisify(execFile)
    const stats = await run(process.execPath, [BIN, 'stats', '--redis-url', redis.url, '--queue', 'q'])
    expect(stats.stdout).toMatch(/\bq\b/)
    await expect(run(process.execPath, [BIN, 'jobs', 'q', '--state', 'active', '--redis-url', redis.url])).resolves.toBeDefined()
  })

  it('echomq sweep exits 1 and says Redis is out of memory', async () => {
    await crashedJobs(redis.client, 'q', 1)
    await fill()
    const run = promisify(execFile)
    const outcome = await run(process.execPath, [BIN, 'sweep', '--redis-url', redis.url, '--queue', 'q', '--grace', '0']).then(
      () => ({ code: 0, stdout: '' }),
      (e: { code: number; stdout: string }) => e,
    )
    expect(outcome.code).toBe(1)
    expect(outcome.stdout).toMatch(/out of memory/)
  })
})

describe('Redis unreachable from a Queue or a Worker', () => {
  it("add() fails after a few reconnects (not ioredis's 20) with ERR_CONNECTION naming the refused address", async () => {
    const port = await freePort()
    // direct: a queue on a faulty server (not the test Redis), the fault under test
    const queue = new Queue('q', { connection: `redis://127.0.0.1:${port}` })
    closing.push(() => queue.close())
    const err = await queue.add('job', {}).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'ERR_CONNECTION' })
    expect((err as Error).message).toMatch(new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`))
  })

  it('a Redis that accepts connections but never answers: a Queue call fails with ERR_CONNECTION naming where, every time', async () => {
    const silent = await startBlackhole()
    const { port } = new URL(silent.url)
    // direct: a wrong password in the URL, the fault under test
    const queue = new Queue('q', { connection: `redis://u:secret@127.0.0.1:${port}` })
    closing.push(async () => {
      await queue.close()
      await silent.close()
    })
    for (const call of [() => queue.add('job', {}), () => queue.counts()]) {
      const err = await call().catch((e: unknown) => e)
      expect(err).toMatchObject({ code: 'ERR_CONNECTION' })
      expect((err as Error).message).toContain(`Redis at redis://u:***@127.0.0.1:${port}`)
      expect((err as Error).message).not.toContain('secret')
    }
  }, 20_000)

  it('a server that is not Redis (an HTTP one) fails a Queue call and the command with ERR_CONNECTION saying so', async () => {
    const http = createServer((_, res) => res.end('hello'))
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    const { port } = http.address() as AddressInfo
    // direct: a queue on a faulty server (not the test Redis), the fault under test
    const queue = new Queue('q', { connection: `redis://127.0.0.1:${port}` })
    closing.push(async () => {
      await queue.close()
      await new Promise((resolve) => http.close(resolve))
    })
    const err = (await queue.add('job', {}).catch((e: unknown) => e)) as EchoMQError
    expect(err.code).toBe('ERR_CONNECTION')
    expect(err.message).toMatch(/(not (answer )?as Redis does|dropped the connection).*check the host and port/)
    const run = promisify(execFile)
    const cli = await run(process.execPath, [BIN, 'stats', '--redis-url', `redis://127.0.0.1:${port}`]).catch(
      (e: { stderr: string; code: number }) => e,
    )
    expect(cli).toMatchObject({ code: 1 })
    // Node's HTTP server may reset the line before its 400 is read: then the hint names the dropped connection.
    expect((cli as { stderr: string }).stderr).toMatch(/(not (answer )?as Redis does|dropped the connection).*check the host and port/)
  })

  it('a database the server does not have (/99 of 16) fails every call with ERR_CONNECTION naming it; nothing lands in database 0', async () => {
    // direct: a database index past the server's, the fault under test
    const queue = new Queue('q', { connection: `${redis.url}/99` })
    closing.push(() => queue.close())
    for (const call of [() => queue.add('job', {}), () => queue.counts()]) {
      const err = (await call().catch((e: unknown) => e)) as EchoMQError
      expect(err.code).toBe('ERR_CONNECTION')
      expect(err.message).toMatch(/DB index is out of range/)
    }
    expect(await redis.client.dbsize()).toBe(0)
  })

  it('a port outside 1-65535 is refused when the Queue is made, before any connection', () => {
    // direct: an out-of-range port refused by the constructor
    expect(() => new Queue('q', { connection: 'redis://127.0.0.1:99999' })).toThrow(
      expect.objectContaining({
        code: 'ERR_OPTIONS',
        variable: 'connection',
        message: expect.stringMatching(/port 99999 .* outside 1-65535/),
      }),
    )
  })

  it('close() fails the calls still waiting for Redis with ERR_CLOSED instead of leaving them unsettled', async () => {
    // direct: a queue on a free port (nothing listening), the fault under test
    const queue = new Queue('q', { connection: `redis://127.0.0.1:${await freePort()}` })
    const pending = queue.add('job', {}).catch((e: unknown) => e)
    const counting = queue.counts().catch((e: unknown) => e)
    // Closed while reconnecting: ioredis then stops retrying and never answers the calls it holds.
    await nextEvent(queue.client as Redis, 'reconnecting')
    await queue.close()
    expect(await pending).toMatchObject({ code: 'ERR_CLOSED' })
    expect(await counting).toMatchObject({ code: 'ERR_CLOSED' })
  })

  it('a Worker reports the outage at once and keeps trying; close() with no job running does not wait out closeTimeout', async () => {
    const port = await freePort()
    // direct: a worker on a faulty server (not the test Redis), the fault under test
    const worker = new Worker('q', async () => 'done', { connection: `redis://127.0.0.1:${port}`, closeTimeout: 60_000 })
    const [err] = await nextEvent<[Error]>(worker, 'error')
    expect(err).toMatchObject({ code: 'ERR_CONNECTION' })
    expect(err.message).toMatch(new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`))
    // Bounded by the test's timeout, far below the 60 s closeTimeout.
    await worker.close()
  })
})

describe('echomq sweep --every is a daemon', () => {
  it('across a Redis restart it reports the failure, keeps its schedule, reconnects and recovers jobs stalled after; it exits only when stopped', async () => {
    const server = await startDurableRedis()
    closing.push(() => server.destroy())
    const daemon = spawn(process.execPath, [BIN, 'sweep', '--every', '200ms', '--queue', 'q', '--grace', '0', '--json'], {
      env: { ...process.env, REDIS_URL: server.url, REDIS_TIMEOUT_MS: '300' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    daemon.stdout.on('data', (d) => (stdout += String(d)))
    daemon.stderr.on('data', (d) => (stderr += String(d)))
    const exited = new Promise<number | null>((resolve) => daemon.once('exit', (code) => resolve(code)))
    closing.push(async () => {
      daemon.kill('SIGKILL')
      await exited
    })
    await waitFor(() => stdout.includes('"sweeps":1'), { what: 'a first sweep' })

    await server.stop('SIGKILL')
    await waitFor(() => /sweep failed, next try in 200ms: ERR_CONNECTION/.test(stderr), { what: 'a failed sweep reported' })
    await server.start()
    const fresh = new Redis(server.port, '127.0.0.1')
    closing.push(async () => fresh.disconnect())
    await crashedJobs(fresh, 'q', 2)
    await waitFor(async () => (await fresh.llen(keys.wait)) === 2, { timeoutMs: 10_000, what: 'jobs stalled after the restart recovered' })

    expect(daemon.exitCode).toBeNull()
    daemon.kill('SIGINT')
    expect(await exited).toBe(1) // stopped; some run failed
  })
})

describe('large jobs', () => {
  it('one take returns at most TAKE_MAX_BYTES of job data (one job if it is larger); a worker still runs them all', async () => {
    const queue = open('q')
    const megabyte = 'x'.repeat(1024 * 1024 - 16)
    for (let i = 0; i < 8; i++) await queue.add('big', megabyte, { jobId: `big${i}` })
    const ids = await readCandidates(redis.client, keys, 8)

    const { taken, left } = await take(redis.client, keys, { workerToken: 'w', leaseMs: 60_000, workerName: 'test' }, ids)

    expect(taken).toHaveLength(1)
    expect(JSON.stringify(taken[0]?.job.data).length).toBeLessThanOrEqual(TAKE_MAX_BYTES)
    expect(left).toEqual(ids.slice(1))
    expect(await redis.client.llen(keys.wait)).toBe(7)
    await holdJobs(redis.client, 'q', 7, { leaseMs: 60_000 }) // calls of 200 candidates still take them all, one a call
    expect(await redis.client.llen(keys.wait)).toBe(0)
    const done: Job[] = []
    const w = worker('q', () => 'ok', { concurrency: 40 })
    closing.push(() => w.close())
    w.on('completed', (job: Job) => done.push(job))
    for (let i = 0; i < 10; i++) await queue.add('big', megabyte)
    await waitFor(() => done.length === 10, { timeoutMs: 20_000, what: 'ten large jobs' })
  })
})
