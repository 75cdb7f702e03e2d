/**
 * EchoMQ over TLS with an ACL user: rediss://emq:<password>@127.0.0.1:<tls port> against a redis-server
 * that has no plaintext port, with a CA made for the run. The Worker, Queue, sweep() and the Lambda
 * handler run in child processes that trust the CA via NODE_EXTRA_CA_CERTS and use only the URL. A wrong
 * password must give a clear ERR_CONNECTION that does not contain the password, and the password must
 * not appear in any output of the children or of the in-process runs.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { EchoMQError, Queue, sweep, Worker } from '../../lib/index.js'
import { DIAGNOSIS_TIMEOUT_MS } from '../../lib/redis/diagnosis.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { startRedis, type TestRedis } from '../helpers/redis-server.js'
import { type Child, spawnTlsClient, spawnTlsWorker, startTlsRedis, type TlsRedis } from '../helpers/tls.js'
import { waitFor } from '../helpers/wait.js'

const run = promisify(execFile)
const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname
let redis: TlsRedis
/** Children using the right URL and a wrong password. */
let good: Child
let bad: Child
/** In-process client as the ACL user, trusting the CA explicitly (the connection-object route). */
let emq: Redis
const children: Child[] = []
/** Everything the in-process runs printed, with console.* or to the streams. */
const inProcessLogs: string[] = []

const base = (redisUrl: string) => ({
  REDIS_URL: redisUrl,
  NODE_EXTRA_CA_CERTS: redis.certs.ca,
  METRICS_MODE: 'off',
  IS_LOCAL: 'true',
  SWEEP_GRACE_MS: '0',
  REDIS_TIMEOUT_MS: '3000',
})

beforeAll(async () => {
  redis = await startTlsRedis()
  ;[good, bad] = await Promise.all([spawnTlsClient(base(redis.url)), spawnTlsClient(base(redis.wrongUrl))])
  children.push(good, bad)
  emq = new Redis({
    host: '127.0.0.1',
    port: redis.tlsPort,
    username: redis.user,
    password: redis.password,
    tls: { ca: readFileSync(redis.certs.ca) },
    maxRetriesPerRequest: 1,
  })
  emq.on('error', () => undefined)
}, 60_000)
afterAll(async () => {
  emq?.disconnect()
  await Promise.all(children.map((c) => c.stop()))
  await redis?.stop()
})
beforeEach(() => {
  const capture = (...args: unknown[]) => void inProcessLogs.push(args.map(String).join(' '))
  for (const method of ['log', 'error', 'warn', 'info', 'debug'] as const) vi.spyOn(console, method).mockImplementation(capture)
  // The reaper's logger writes to the streams themselves, not through console.
  for (const stream of [process.stdout, process.stderr]) {
    vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
      capture(String(chunk))
      return true
    })
  }
})
afterEach(() => {
  vi.restoreAllMocks()
})

async function worker(queue: string, url = redis.url, extra: Record<string, string> = {}): Promise<Child> {
  const w = await spawnTlsWorker({ ...base(url), QUEUE: queue, LOCK_MS: '600', HEARTBEAT_MS: '150', ...extra })
  children.push(w)
  return w
}

describe('rediss:// with an ACL user', () => {
  it('the server speaks TLS only, and the ACL user is what EchoMQ connects as', async () => {
    expect(await redis.admin.config('GET', 'port')).toEqual(['port', '0'])
    expect(await emq.acl('WHOAMI')).toBe('emq')
    // The plain default user cannot get in without the admin password.
    const anonymous = new Redis({
      host: '127.0.0.1',
      port: redis.tlsPort,
      tls: { ca: readFileSync(redis.certs.ca) },
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    anonymous.on('error', () => undefined)
    await expect(anonymous.get('x')).rejects.toThrow(/NOAUTH|Authentication required/)
    anonymous.disconnect()
  })

  it('a Worker process and Queue.add in another process, both on the URL: the job is taken and completed', async () => {
    const w = await worker('tq')
    const added = await good.request({ op: 'add', queue: 'tq', jobId: 'a' })
    expect(added).toMatchObject({ ok: true, result: { id: 'a', state: 'wait' } })

    await w.waitForMessage('active', 'a')
    w.send({ type: 'finish', id: 'a' })
    await w.waitForMessage('completed', 'a')

    expect(await emq.hget(queueKeys('emq', 'tq').job('a'), 'state')).toBe('completed')
    const clients = String(await redis.admin.client('LIST'))
    expect(clients).toMatch(/ user=emq /)
    expect(w.messages.filter((m) => m.type === 'error')).toEqual([])
  })

  it("a killed worker's jobs: sweep() in a child marks them, the Lambda handler in a child recovers them", async () => {
    const w = await worker('cq', redis.url, { CONCURRENCY: '2' })
    for (const id of ['k1', 'k2']) expect((await good.request({ op: 'add', queue: 'cq', jobId: id })).ok).toBe(true)
    await waitFor(() => ['k1', 'k2'].every((id) => w.active().includes(id)), { what: 'worker to take k1,k2' })
    const keys = queueKeys('emq', 'cq')

    w.kill('SIGKILL')
    await waitFor(async () => (await emq.exists(keys.lock('k1'), keys.lock('k2'))) === 0, { what: 'leases to lapse' })
    const first = await good.request({ op: 'sweep', queue: 'cq' })
    const second = await good.request({ op: 'handler' })

    expect(first).toMatchObject({ ok: true, result: { marked: expect.arrayContaining(['k1', 'k2']), recovered: [], failed: [] } })
    expect(second).toMatchObject({
      ok: true,
      result: { sweeps: 1, queues: { cq: { marked: 0, recovered: 2, failed: 0 }, tq: { marked: 0, recovered: 0, failed: 0 } } },
    })
    for (const q of Object.values((second.result as { queues: Record<string, object> }).queues)) expect(q).not.toHaveProperty('error')
    // direct: a queue on the TLS client of this test (emq), not the plain test Redis
    expect(await new Queue('cq', { connection: emq }).counts()).toEqual({
      wait: 2,
      prioritized: 0,
      active: 0,
      stalled: 0,
      delayed: 0,
      completed: 0,
      failed: 0,
    })
    // In process, the connection-object route works over TLS too (the CA passed explicitly).
    expect(await sweep(emq, 'cq', { graceMs: 0 })).toEqual({ marked: [], recovered: [], failed: [] })
  })
})

describe('a wrong password', () => {
  it('the handler fails fast with ERR_AUTH, sweep() and Queue.add with ERR_CONNECTION, naming WRONGPASS, without the password', async () => {
    const started = Date.now()
    const handler = await bad.request({ op: 'handler' })
    const swept = await bad.request({ op: 'sweep', queue: 'cq' })
    const added = await bad.request({ op: 'add', queue: 'cq', jobId: 'nope' })

    for (const reply of [handler, swept, added]) {
      expect(reply.ok).toBe(false)
      expect(reply.error).toMatchObject({ name: 'EchoMQError', code: reply === handler ? 'ERR_AUTH' : 'ERR_CONNECTION' })
      expect(reply.error?.message).toMatch(/WRONGPASS|authentication/i)
      expect(reply.error?.message).not.toContain(redis.wrongPassword)
    }
    expect(handler.error?.message).toContain(`rediss://emq:***@127.0.0.1:${redis.tlsPort}`)
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(await emq.exists(queueKeys('emq', 'cq').job('nope'))).toBe(0)
  })

  it('a Worker reports the failure as an error event naming WRONGPASS, without the password', async () => {
    const w = await worker('wq', redis.wrongUrl)
    const error = await w.waitForMessage('error')
    expect(error.message).toMatch(/WRONGPASS/)
    expect(error.message).not.toContain(redis.wrongPassword)
  })

  it('the error objects handed to callers carry no password anywhere in their cause chain', async () => {
    const replies = [await bad.request({ op: 'handler' }), await bad.request({ op: 'sweep', queue: 'cq' })]
    for (const reply of replies) {
      expect(reply.error?.inspected).toMatch(/WRONGPASS/)
      expect(reply.error?.inspected).not.toContain(redis.wrongPassword)
    }
  })
})

describe('a CA the process does not trust', () => {
  it('in process, without NODE_EXTRA_CA_CERTS: the handler fails fast with ERR_CONNECTION that names the certificate problem', async () => {
    const handler = createHandler({ REDIS_URL: redis.url, METRICS_MODE: 'off', IS_LOCAL: 'true', REDIS_TIMEOUT_MS: '1000' })
    const started = Date.now()
    const err = await handler({}, {}).catch((e: unknown) => e)

    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe('ERR_CONNECTION')
    expect((err as EchoMQError).message).not.toContain(redis.password)
    expect(Date.now() - started).toBeLessThan(5_000)
    expect((err as EchoMQError).message).toMatch(/certificate/i)
    expect((err as EchoMQError).hint).toMatch(/not signed by a CA this process trusts: give the CA with NODE_EXTRA_CA_CERTS/)
  })

  it('in a process without the CA, sweep(url) gives up within 8 s with ERR_CONNECTION naming the certificate problem', async () => {
    const { NODE_EXTRA_CA_CERTS: _ca, ...untrusting } = base(redis.url)
    const child = await spawnTlsClient(untrusting)
    children.push(child)
    const started = Date.now()

    const reply = await child.request({ op: 'sweep', queue: 'cq' }, 8_000)

    expect(Date.now() - started).toBeLessThan(8_000)
    expect(reply.error).toMatchObject({ code: 'ERR_CONNECTION' })
    expect(reply.error?.message).not.toContain(redis.password)
    expect(reply.error?.message).toMatch(/certificate/i)
  })
})

describe('ioredis options over TLS', () => {
  it('{ host, port, username, password, tls: { ca } } as connection: a Queue adds and a Worker completes, in process', async () => {
    const connection = {
      host: '127.0.0.1',
      port: redis.tlsPort,
      username: redis.user,
      password: redis.password,
      tls: { ca: readFileSync(redis.certs.ca) },
    }
    // direct: TLS connection options (ca) are under test
    const queue = new Queue('oq', { connection })
    // direct: TLS connection options (ca) are under test
    const worker = new Worker('oq', async () => 'ok', { connection })
    try {
      const completed = new Promise((resolve) => worker.on('completed', resolve))
      await queue.add('job', {}, { jobId: 'o1' })
      await completed
      expect(await emq.hget(queueKeys('emq', 'oq').job('o1'), 'state')).toBe('completed')
    } finally {
      await Promise.all([queue.close(), worker.close()])
    }
  })
})

describe('a URL whose scheme does not match the port', () => {
  let plain: TestRedis
  beforeAll(async () => {
    plain = await startRedis()
  })
  afterAll(async () => {
    await plain?.stop()
  })
  const handlerError = async (url: string) => {
    const handler = createHandler({ REDIS_URL: url, METRICS_MODE: 'off', IS_LOCAL: 'true', REDIS_TIMEOUT_MS: '1000' })
    return (await handler({}, {}).catch((e: unknown) => e)) as EchoMQError
  }
  const cliError = (url: string) =>
    run(process.execPath, [BIN, 'stats', '--redis-url', url], { env: { ...process.env, NODE_EXTRA_CA_CERTS: redis.certs.ca } }).catch(
      (e: { code: number; stderr: string }) => e,
    )

  it('rediss:// on a plain port: the handler, a Queue call and the CLI say the port speaks plain Redis and to use redis://', async () => {
    const url = `rediss://127.0.0.1:${plain.port}`
    const started = performance.now()
    const handler = await handlerError(url)
    expect(performance.now() - started).toBeLessThan(1_000 + DIAGNOSIS_TIMEOUT_MS + 1_000)
    expect(handler).toMatchObject({ code: 'ERR_CONNECTION', hint: expect.stringMatching(/use a redis:\/\/ URL \(no TLS\)/) })
    expect(handler.message).toMatch(new RegExp(`127\\.0\\.0\\.1:${plain.port} speaks plain Redis, not TLS`))
    // direct: a rediss:// URL on a plain port is under test
    const queue = new Queue('q', { connection: url })
    const added = await queue.add('job', {}).catch((e: unknown) => e)
    await queue.close()
    expect(added).toMatchObject({ code: 'ERR_CONNECTION', message: expect.stringMatching(/speaks plain Redis, not TLS/) })
    expect(await cliError(url)).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/speaks plain Redis, not TLS: use a redis:\/\/ URL/),
    })
  }, 30_000)

  it("rediss:// on a plain port: a Worker's error event says so before a Queue call waiting on the same port gives up", async () => {
    const url = `rediss://127.0.0.1:${plain.port}`
    // direct: a Worker and a Queue on a rediss:// URL to a plain port are under test
    const worker = new Worker('q', async () => 'ok', { connection: url })
    const heard = new Promise<EchoMQError>((resolve) => worker.on('error', (err) => resolve(err as EchoMQError)))
    // direct: as above
    const queue = new Queue('q', { connection: url })
    const order: string[] = []
    const added = queue.add('job', {}).catch(() => order.push('queue call failed'))
    const err = await heard
    order.push('worker error')
    await added
    await Promise.all([worker.close(), queue.close()])
    expect(order).toEqual(['worker error', 'queue call failed'])
    expect(err).toMatchObject({
      code: 'ERR_CONNECTION',
      message: expect.stringMatching(/speaks plain Redis, not TLS: use a redis:\/\/ URL/),
    })
  }, 30_000)

  it('redis:// on the TLS port: the handler, a Queue call and the CLI say the port speaks TLS and to use rediss://', async () => {
    const url = `redis://emq:${redis.password}@127.0.0.1:${redis.tlsPort}`
    const handler = await handlerError(url)
    expect(handler).toMatchObject({ code: 'ERR_CONNECTION', hint: 'use a rediss:// URL (TLS) for this port' })
    expect(handler.message).not.toContain(redis.password)
    // direct: a redis:// URL on a TLS port is under test
    const queue = new Queue('q', { connection: url })
    const added = await queue.add('job', {}).catch((e: unknown) => e)
    await queue.close()
    expect(added).toMatchObject({ code: 'ERR_CONNECTION', message: expect.stringMatching(/speaks TLS: use a rediss:\/\/ URL/) })
    const cli = await cliError(url)
    expect(cli).toMatchObject({ code: 1, stderr: expect.stringMatching(/speaks TLS: use a rediss:\/\/ URL/) })
    expect(cli.stderr).not.toContain(redis.password)
  }, 30_000)
})

describe('secrets in output', () => {
  it('the password appears in no output of any child process nor in console output of the in-process runs', async () => {
    expect(await good.request({ op: 'handler' })).toMatchObject({ ok: true })
    const outputs = children.map((c) => c.output())
    const ipc = children.map((c) =>
      JSON.stringify(c.messages.map(({ error, ...m }) => ({ ...m, error: error && { ...error, inspected: undefined } }))),
    )
    // The capture works: the handler's JSON log lines and the logged failures are there.
    expect(good.output()).toContain('"message":"summary"')
    expect(bad.output()).toMatch(/WRONGPASS/)
    for (const secret of [redis.password, redis.wrongPassword, redis.adminPassword]) {
      expect(outputs.join('\n') + ipc.join('\n')).not.toContain(secret)
      expect(inProcessLogs.join('\n')).not.toContain(secret)
    }
  })
})
