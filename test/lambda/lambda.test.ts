/**
 * The worker handler (echomq/lambda) in real processes against a real Redis: drained and deadline runs with
 * a context whose remaining time runs down, a run given up at its time, SIGKILL and SIGSTOP while holding
 * jobs (the sweep recovers them; a thawed finish is refused), nothing left running after a return, warm
 * reuse of the connection and a reconnect after it was dropped, and bad events and options.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, expect, it } from 'vitest'
import { sweep } from '../../lib/index.js'
import { createWorkerHandler } from '../../lib/lambda/index.js'
import { backlog } from '../../lib/redis/commands.js'
import { useQueue } from '../helpers/fixture.js'
import { freePort, startRedis, useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis)
const { keys } = fx
const PROCESS = fileURLToPath(new URL('../helpers/worker-function-process.ts', import.meta.url))
const children: ChildProcess[] = []

interface Message {
  type: string
  id?: string
  outcome?: string
  result?: Record<string, unknown>
  error?: { code?: string; message: string }
  timers?: string[]
}

interface Fn {
  child: ChildProcess
  messages: Message[]
  next(type: string, id?: string, timeoutMs?: number): Promise<Message>
  invoke(remainingMs: number, event?: unknown): Promise<Message>
  send(m: object): void
}

async function spawnFunction(env: Record<string, string> = {}): Promise<Fn> {
  const child = fork(PROCESS, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '400', ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  children.push(child)
  const messages: Message[] = []
  let seen = 0
  child.on('message', (m: Message) => messages.push(m))
  const next = async (type: string, id?: string, timeoutMs = 15_000) => {
    const found = await waitFor(() => messages.slice(seen).find((m) => m.type === type && (id === undefined || m.id === id)), {
      timeoutMs,
      what: `worker function message ${type} ${id ?? ''}`,
    })
    if (type === 'result') seen = messages.indexOf(found) + 1
    return found
  }
  await waitFor(() => messages.some((m) => m.type === 'ready'), { timeoutMs: 20_000, what: 'worker function process' })
  return {
    child,
    messages,
    next,
    send: (m) => child.send(m),
    invoke: (remainingMs, event) => {
      child.send({ type: 'invoke', remainingMs, event })
      return next('result', undefined, remainingMs + 15_000)
    },
  }
}

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGCONT')
      child.kill('SIGKILL')
      await exited
    }
  }
  await fx.queue.close()
})

const addJobs = (n: number, data: object, from = 0) =>
  fx.queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'j', data, opts: { jobId: `j${from + i}` } })))

it('drains the queue, returns drained with the counts, leaves no timer, and reuses its connection warm (reconnecting after a drop)', async () => {
  const fn = await spawnFunction({ CONCURRENCY: '4' })
  await addJobs(20, { ms: 5 })

  const first = await fn.invoke(60_000)
  expect(first.result).toMatchObject({ queue: 'q', processed: 20, completed: 20, failed: 0, handedBack: 0, reason: 'drained' })
  expect(first.timers).toEqual([])
  expect(await fx.queue.getJobCounts('wait', 'active', 'completed', 'prioritized')).toEqual({
    wait: 0,
    active: 0,
    completed: 20,
    prioritized: 0,
  })
  expect(await redis.client.exists(keys.invocations)).toBe(0)

  const connectionsBefore = Number(/total_connections_received:(\d+)/.exec(await redis.client.info('stats'))?.[1])
  await addJobs(3, { ms: 1 }, 100)
  const warm = await fn.invoke(60_000)
  const connectionsAfter = Number(/total_connections_received:(\d+)/.exec(await redis.client.info('stats'))?.[1])
  expect(warm.result).toMatchObject({ processed: 3, completed: 3, reason: 'drained' })
  expect(warm.timers).toEqual([])
  expect(connectionsAfter).toBe(connectionsBefore)

  // The server drops the idle connection (as after a long freeze): the next invocation reconnects.
  const own = await redis.client.client('ID')
  const list = (await redis.client.client('LIST')) as string
  for (const id of [...list.matchAll(/^id=(\d+)/gm)].map((m) => Number(m[1])).filter((id) => id !== own)) {
    await redis.client.client('KILL', 'ID', id)
  }
  await addJobs(2, { ms: 1 }, 200)
  const after = await fn.invoke(60_000)
  expect(after.result).toMatchObject({ processed: 2, completed: 2, reason: 'drained' })
})

it('an empty queue: drained at once, nothing taken, no timer left', async () => {
  const fn = await spawnFunction()
  const result = await fn.invoke(60_000, { source: 'aws.events', 'detail-type': 'Scheduled Event', detail: {} })
  expect(result.result).toMatchObject({ processed: 0, completed: 0, handedBack: 0, reason: 'drained' })
  expect(result.result?.ms as number).toBeLessThan(2_000)
  expect(result.timers).toEqual([])
})

it('stops taking at the deadline (remaining < jobTimeoutMs + reserveMs), lets the running job end, leaves the rest waiting with no attempt used', async () => {
  const fn = await spawnFunction({ JOB_TIMEOUT_MS: '600', RESERVE_MS: '300' })
  await addJobs(30, { ms: 150 })

  const started = performance.now()
  const { result, timers } = await fn.invoke(2_000)
  const took = performance.now() - started

  expect(result?.reason).toBe('deadline')
  expect(took).toBeLessThan(2_000)
  const processed = result?.processed as number
  expect(processed).toBeGreaterThanOrEqual(4)
  expect(processed).toBeLessThan(30)
  expect(result).toMatchObject({ completed: processed, failed: 0 })
  expect(timers).toEqual([])
  const waiting = await fx.queue.getJobs(['wait'])
  expect(waiting.length).toBe(30 - processed)
  expect(waiting.every((j) => j.attemptsMade === 0)).toBe(true)
  expect(await fx.queue.getJobCounts('active')).toEqual({ active: 0 })
})

it('a processor still running when its time is up: its lease is given up at once (the job retried at once), an attempt used per run, its late write refused', async () => {
  const fn = await spawnFunction({ JOB_TIMEOUT_MS: '500', RESERVE_MS: '200' })
  await fx.queue.add('slow', { ms: 1_500, ignoreSignal: true, lateWrite: true }, { jobId: 'slow', attempts: 3 })

  const started = performance.now()
  const { result } = await fn.invoke(30_000)
  // Each run gave up its lease at its timeout, so the job was back in `wait` and taken again at once, until its attempts ran out.
  expect(result).toMatchObject({ processed: 3, completed: 0, failed: 3, reason: 'drained' })
  expect(performance.now() - started).toBeLessThan(5_000)
  const job = await fx.queue.getJob('slow')
  expect(job).toMatchObject({ state: 'failed', attemptsMade: 3 })
  expect(job?.failedReason).toMatch(/ran past 500 ms/)
  expect(await redis.client.exists(keys.lock('slow'))).toBe(0)
  const late = await fn.next('late', 'slow', 5_000)
  expect(late.outcome).not.toBe('written')
})

it('honours event.maxJobs: starts that many, hands the rest back unstarted', async () => {
  const fn = await spawnFunction({ CONCURRENCY: '2' })
  await addJobs(10, { ms: 20 })
  const { result } = await fn.invoke(60_000, { queue: 'q', maxJobs: 3 })
  expect(result).toMatchObject({ processed: 3, completed: 3, reason: 'maxJobs' })
  const waiting = await fx.queue.getJobs(['wait'])
  expect(waiting.length).toBe(7)
  expect(waiting.every((j) => j.attemptsMade === 0)).toBe(true)
})

/** Reads Redis did for its clients (each a wake-up: a write of a client's), less the INFO that asks. */
const readsSince = async (before?: number) => {
  const reads = Number(/total_reads_processed:(\d+)/.exec(await redis.client.info('stats'))?.[1])
  return before === undefined ? reads : reads - before - 1
}

it('a warm invocation reaches Redis in as few writes as it can: its mark with its first read, its leave with its last finish', async () => {
  const handler = createWorkerHandler('q', async () => 'ok', { connection: redis.url, concurrency: 10 })
  const context = { getRemainingTimeInMillis: () => 60_000 }
  try {
    await addJobs(5, {})
    expect(await handler({ maxJobs: 5 }, context)).toMatchObject({ completed: 5 })
    await addJobs(30, {}, 100)
    const before = await readsSince()
    expect(await handler({ maxJobs: 20 }, context)).toMatchObject({ processed: 20, completed: 20, reason: 'maxJobs' })
    // Mark, registration and read of candidates; the take; two finishes of 10 (the second with the leave).
    // The mark was entered and left as before: one write each at the edges instead of five (8 reads).
    expect(await readsSince(before)).toBeLessThanOrEqual(4)
    expect(await redis.client.exists(keys.invocations)).toBe(0)
    expect(await fx.queue.getJobCounts('wait', 'active', 'completed')).toEqual({ wait: 10, active: 0, completed: 25 })
  } finally {
    await handler.close()
  }
})

it('an invocation whose mark cannot be entered runs no job: what its first take returned goes back unstarted', async () => {
  let ran = 0
  const handler = createWorkerHandler(
    'q',
    async () => {
      ran++
      return 'ok'
    },
    { connection: redis.url, concurrency: 4 },
  )
  const context = { getRemainingTimeInMillis: () => 60_000 }
  try {
    await addJobs(6, {})
    // invocation-1.lua fails on a key of the wrong type; the Worker's first commands went in the same write.
    await redis.client.set(keys.invocations, 'not a sorted set')
    await expect(handler({}, context)).rejects.toMatchObject({ code: 'ERR_CONNECTION', message: /WRONGTYPE/ })
    expect(ran).toBe(0)
    const waiting = await fx.queue.getJobs(['wait'])
    expect(waiting.length).toBe(6)
    expect(waiting.every((j) => j.attemptsMade === 0)).toBe(true)
    expect(await fx.queue.getJobCounts('active')).toEqual({ active: 0 })

    await redis.client.del(keys.invocations)
    expect(await handler({}, context)).toMatchObject({ processed: 6, completed: 6, reason: 'drained' })
  } finally {
    await handler.close()
  }
})

it('a warm connection to a Redis that stops answering: ERR_CONNECTION within redisTimeoutMs, not a wait for the Worker sent with the mark', async () => {
  const own = await startRedis()
  const handler = createWorkerHandler('q', async () => 'ok', { connection: own.url, redisTimeoutMs: 300 })
  const context = { getRemainingTimeInMillis: () => 60_000 }
  try {
    expect(await handler({}, context)).toMatchObject({ reason: 'drained' })
    own.process.kill('SIGSTOP')
    const started = performance.now()
    await expect(handler({}, context)).rejects.toMatchObject({ code: 'ERR_CONNECTION', message: /no answer within 300 ms/ })
    expect(performance.now() - started).toBeLessThan(3_000)
  } finally {
    own.process.kill('SIGCONT')
    await handler.close()
    await own.stop()
  }
})

it('killed with SIGKILL while holding a job: the sweep recovers it, and the invocation stops counting within its lease', async () => {
  const fn = await spawnFunction()
  await fx.queue.add('held', { hold: true }, { jobId: 'h1' })
  fn.send({ type: 'invoke', remainingMs: 60_000 })
  await fn.next('active', 'h1')
  expect((await backlog(redis.client, keys)).live).toBe(1)

  fn.child.kill('SIGKILL')
  await waitFor(async () => (await redis.client.exists(keys.lock('h1'))) === 0, { what: 'lease of h1 to lapse' })
  await sweep(redis.url, 'q', { graceMs: 0 })
  const second = await sweep(redis.url, 'q', { graceMs: 0 })
  expect(second.recovered).toEqual(['h1'])
  expect(await fx.queue.getJob('h1')).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1 })
  await waitFor(async () => (await backlog(redis.client, keys)).live === 0, { what: 'the killed invocation to stop counting' })
})

it('frozen with SIGSTOP while holding a job: the sweep recovers it, and the thawed run cannot finish it', async () => {
  const fn = await spawnFunction()
  await fx.queue.add('held', { hold: true }, { jobId: 'f1' })
  fn.send({ type: 'invoke', remainingMs: 60_000 })
  await fn.next('active', 'f1')

  fn.child.kill('SIGSTOP')
  await waitFor(async () => (await redis.client.exists(keys.lock('f1'))) === 0, { what: 'lease of f1 to lapse' })
  await sweep(redis.url, 'q', { graceMs: 0 })
  const second = await sweep(redis.url, 'q', { graceMs: 0 })
  expect(second.recovered).toEqual(['f1'])
  // Paused, so the thawed invocation cannot take the recovered job again: what is left to see is its old run's finish.
  await fx.queue.pause()
  fn.child.kill('SIGCONT')
  fn.send({ type: 'finish', id: 'f1' })

  const { result } = await fn.next('result')
  expect(result).toMatchObject({ processed: 1, completed: 0 })
  expect(await fx.queue.getJob('f1')).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1 })
  expect(await fx.queue.getJobCounts('completed')).toEqual({ completed: 0 })
})

it('bad events and options are refused with a typed error, and change nothing in Redis', async () => {
  await addJobs(2, { ms: 1 })
  const before = await redis.client.dbsize()
  const handler = createWorkerHandler('q', async () => 'ok', { connection: redis.url })
  const context = { getRemainingTimeInMillis: () => 60_000 }
  try {
    for (const event of [
      'x',
      [1],
      { queues: ['q'] },
      { maxJobs: 0 },
      { maxJobs: 1.5 },
      { queue: 'bad name' },
      { queue: 'payments' },
      { invocation: 'a b' },
    ]) {
      await expect(handler(event, context)).rejects.toMatchObject({ name: 'EchoMQError', code: 'ERR_EVENT' })
    }
    await expect(handler({}, {} as never)).rejects.toMatchObject({ code: 'ERR_EVENT' })
  } finally {
    await handler.close()
  }
  expect(await redis.client.dbsize()).toBe(before)
  expect(await fx.queue.getJobCounts('wait')).toEqual({ wait: 2 })

  expect(() => createWorkerHandler('q', async () => 1, { jobTimeoutMs: 0 })).toThrow(expect.objectContaining({ code: 'ERR_OPTIONS' }))
  expect(() => createWorkerHandler('q', async () => 1, { reserveMs: -1 })).toThrow(expect.objectContaining({ code: 'ERR_OPTIONS' }))
  expect(() => createWorkerHandler('q', async () => 1, { concurency: 2 } as never)).toThrow(/did you mean "concurrency"/)
  expect(() => createWorkerHandler('bad name', async () => 1)).toThrow(expect.objectContaining({ code: 'ERR_QUEUE_NAME' }))
})

it('a Redis that does not answer fails the invocation with ERR_CONNECTION within redisTimeoutMs, naming the URL without its password', async () => {
  const url = `redis://user:secret-pw@127.0.0.1:${await freePort()}`
  const handler = createWorkerHandler('q', async () => 1, { connection: url, redisTimeoutMs: 300 })
  const started = performance.now()
  try {
    const err = await handler({}, { getRemainingTimeInMillis: () => 60_000 }).catch((e: unknown) => e)
    expect(err).toMatchObject({ name: 'EchoMQError', code: 'ERR_CONNECTION' })
    expect(String((err as Error).message)).not.toContain('secret-pw')
    expect(performance.now() - started).toBeLessThan(3_000)
  } finally {
    await handler.close()
  }
})
