/**
 * A Worker closed while Redis is unreachable lets its process exit: no reconnect and no wait for replies
 * that cannot come stay scheduled, so a SIGTERM handler that awaits close() ends the
 * process rather than holding it for a lease. A client the app passed in stays the app's: close() never
 * disconnects it (a worker function's container shares one across invocations).
 */
import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { expect, it } from 'vitest'
import { type Job, Queue, Worker } from '../../lib/index.js'
import { freePort, spawnRedisServer } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const CHILD = fileURLToPath(new URL('../helpers/close-offline-process.ts', import.meta.url))

it('a worker closed with Redis unreachable leaves no timer, and its process exits', async () => {
  const port = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: { ...process.env, CLOSE_URL: `redis://127.0.0.1:${port}`, CLOSE_AFTER_MS: '500' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (chunk) => (out += chunk))
  // Before the fix the process lived a whole lease (30 s) after close(); what may remain is ioredis's own
  // disconnectTimeout (2 s) on the socket it was trying.
  const exit = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      resolve(null)
    }, 10_000)
    child.once('exit', (code) => {
      clearTimeout(timer)
      resolve(code)
    })
  })
  const report = JSON.parse(out.trim()) as { closed: boolean; timers: string[] }
  expect(report.closed).toBe(true)
  expect(report.timers.length).toBeLessThanOrEqual(1)
  expect(exit).toBe(0)
}, 30_000)

it("a worker on the app's own client leaves it to the app: closed with Redis down, the client reconnects when Redis is back", async () => {
  const port = await freePort()
  const dir = await mkdtemp(join(tmpdir(), 'emq-shared-'))
  let server = spawnRedisServer(port, dir)
  const shared = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: null, retryStrategy: () => 50 })
  shared.on('error', () => undefined)
  try {
    await waitFor(async () => (await shared.ping().catch(() => '')) === 'PONG', { timeoutMs: 10_000, what: 'redis-server up' })
    // direct: the worker is given the app's client, whose fate after close() is under test
    const worker = new Worker('q', async () => 'ok', { connection: shared, lockDuration: 500 })
    worker.on('error', () => undefined)
    await worker.waitUntilReady()
    server.kill('SIGKILL')
    await waitFor(() => shared.status !== 'ready', { timeoutMs: 10_000, what: 'the client to see Redis gone' })
    await worker.close()
    expect(shared.status).not.toBe('end')
    server = spawnRedisServer(port, dir)
    await waitFor(async () => (await shared.ping().catch(() => '')) === 'PONG', { timeoutMs: 10_000, what: 'the shared client back' })
  } finally {
    shared.disconnect()
    server.kill('SIGKILL')
    await rm(dir, { recursive: true, force: true })
  }
}, 30_000)

it("a worker closed on a stalled link leaves the app's own client open once the link answers again", async () => {
  const port = await freePort()
  const dir = await mkdtemp(join(tmpdir(), 'emq-shared-'))
  const server = spawnRedisServer(port, dir)
  const shared = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: null, retryStrategy: () => 50 })
  shared.on('error', () => undefined)
  try {
    await waitFor(async () => (await shared.ping().catch(() => '')) === 'PONG', { timeoutMs: 10_000, what: 'redis-server up' })
    let release: () => void = () => undefined
    const held = new Promise<void>((resolve) => (release = resolve))
    // direct: the worker is given the app's client, whose fate after close() is under test
    const worker = new Worker('q', () => held.then(() => 'ok'), { connection: shared, lockDuration: 500, closeTimeout: 200 })
    worker.on('error', () => undefined)
    const started = new Promise<Job>((resolve) => worker.once('active', resolve))
    // direct: a queue on the same shared client
    const queue = new Queue('q', { connection: shared })
    const job = await queue.add('x', {})
    await started
    server.kill('SIGSTOP')
    release()
    await worker.close()
    server.kill('SIGCONT')
    // The finish lands once the server runs again; the close's last step follows its reply.
    await waitFor(async () => (await queue.getJobState(job.id).catch(() => '')) === 'completed', { timeoutMs: 10_000, what: 'the finish' })
    expect(shared.status).toBe('ready')
    expect(await shared.ping()).toBe('PONG')
    await queue.close()
  } finally {
    shared.disconnect()
    server.kill('SIGKILL')
    await rm(dir, { recursive: true, force: true })
  }
}, 30_000)
