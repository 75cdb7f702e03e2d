/** Bad input gets an EchoMQError with a code, and nothing in Redis is changed. */
import { beforeEach, describe, expect, it } from 'vitest'
import { EchoMQError, MetricsTime, Queue, sweep, Worker } from '../../lib/index.js'
import { useQueue, useQueues } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'

const redis = useRedis()
const fx = useQueue(redis, { queue: { maxDataBytes: 1024 } })
const { open } = useQueues(redis)
beforeEach(async () => {
  await fx.queue.add('seed', { existing: true }, { jobId: 'seed' })
})

async function rejects(code: string, call: () => unknown): Promise<EchoMQError> {
  const before = await snapshot(redis.client)
  let caught: unknown
  try {
    await call()
  } catch (err) {
    caught = err
  }
  expect(caught, 'expected the call to throw').toBeInstanceOf(EchoMQError)
  expect((caught as EchoMQError).code).toBe(code)
  expect(await snapshot(redis.client)).toEqual(before)
  return caught as EchoMQError
}

const badQueueNames: unknown[] = ['', 'a b', 'q{x}', 'é', 'a/b', 'x'.repeat(129), 42, null, undefined]
const badJobIds: unknown[] = [
  '',
  'a:b',
  'a:b:c:d',
  'line\nbreak',
  'x'.repeat(257),
  '0:a:b',
  'schedulers:a:b',
  7,
  'wait',
  'active',
  'stalled',
  'failed',
  'completed',
  'marker',
]

describe('queue names', () => {
  it.each(badQueueNames.map((n) => [JSON.stringify(n) ?? String(n), n]))('rejects %s in Queue, Worker and sweep', async (_label, name) => {
    // direct: the constructors’ name validation is under test
    await rejects('ERR_QUEUE_NAME', () => new Queue(name as string, { connection: redis.client }))
    await rejects('ERR_QUEUE_NAME', () => new Worker(name as string, () => 1, { connection: redis.client })) // direct: as above
    await rejects('ERR_QUEUE_NAME', () => sweep(redis.client, name as string))
  })

  it('accepts the full alphabet and 128 characters', () => {
    // direct: the constructor’s accepted names are under test
    expect(new Queue('Az09._:-', { connection: redis.client }).name).toBe('Az09._:-')
    expect(new Queue('q'.repeat(128), { connection: redis.client }).name).toHaveLength(128) // direct: as above
  })
})

describe('job ids', () => {
  it.each(badJobIds.map((id) => [JSON.stringify(id), id]))('rejects %s in add and getJob', async (_label, id) => {
    await rejects('ERR_JOB_ID', () => fx.queue.add('x', {}, { jobId: id as string }))
    await rejects('ERR_JOB_ID', () => fx.queue.getJob(id as string))
  })

  it('an integer is refused as a custom jobId (EchoMQ gives those) and read by getJob', async () => {
    await rejects('ERR_JOB_ID', () => fx.queue.add('x', {}, { jobId: '42' }))
    expect(await fx.queue.getJob('42')).toBeUndefined()
  })

  it('adding an existing jobId returns the stored job and changes nothing', async () => {
    const before = await snapshot(redis.client)
    const again = await fx.queue.add('other-name', { different: 1 }, { jobId: 'seed', attempts: 9 })
    expect(again).toMatchObject({ id: 'seed', name: 'seed', data: { existing: true }, attempts: 1, state: 'wait' })
    expect(await snapshot(redis.client)).toEqual(before)
  })
})

describe('job data and names', () => {
  const circular: Record<string, unknown> = {}
  circular.self = circular
  it.each([
    ['a BigInt', { n: 1n }],
    ['a circular object', circular],
    ['a function', () => 1],
    ['a symbol', Symbol('s')],
    ['NaN', Number.NaN],
    ['Infinity deep inside', { a: [1, { b: -Infinity }] }],
    ['a function inside an object', { f: () => 1 }],
    ['a symbol inside an array', [1, Symbol('s')]],
    ['a Map', { m: new Map([[1, 2]]) }],
    ['a Set', new Set([1])],
    ['an Error', { e: new Error('x') }],
    ['a RegExp', { r: /re/ }],
    ['a Promise', { p: Promise.resolve(1) }],
    ['undefined in an array', [1, undefined]],
    ['a Buffer', { b: Buffer.from('hi') }],
    ['a typed array', new Uint8Array([1, 2])],
    ['an invalid Date', { d: new Date(Number.NaN) }],
    ['data over maxDataBytes', { text: 'x'.repeat(2000) }],
  ])('rejects %s', async (_label, data) => {
    const err = await rejects('ERR_JOB_DATA', () => fx.queue.add('x', data))
    expect(err.message).toMatch(/JSON|maxDataBytes/)
  })

  it('keeps what JSON keeps as is: undefined properties are left out, a Date becomes its ISO text', async () => {
    const on = new Date('2026-12-01T00:00:00.000Z')
    const job = await fx.queue.add('x', { gone: undefined, on, n: null })
    expect((await fx.queue.getJob(job.id))?.data).toEqual({ on: '2026-12-01T00:00:00.000Z', n: null })
  })

  it('the default limit is 1 MiB', async () => {
    const q = open('big')
    await rejects('ERR_JOB_DATA', () => q.add('x', 'x'.repeat(1024 * 1024)))
    await expect(q.add('x', 'x'.repeat(1024 * 1024 - 2))).resolves.toMatchObject({ state: 'wait' })
  })

  it.each([[''], ['x'.repeat(257)], [5], ['bad \ud800 half'], ['\udc00 alone'], ['end \ud83d']])(
    'rejects the job name %j',
    async (name) => {
      await rejects('ERR_JOB_NAME', () => fx.queue.add(name as string, {}))
    },
  )

  it('accepts well-formed names with any characters, and stores them as given', async () => {
    for (const name of ['send \u{1F4E7} mail', 'día', '\u4e2d\u6587']) {
      const job = await fx.queue.add(name, {})
      expect((await fx.queue.getJob(job.id))?.name).toBe(name)
    }
  })
})

describe('options', () => {
  const proc = () => 1
  it.each([
    [{ lockDuration: 0 }, /lockDuration to be a positive integer \(ms\), got: 0/],
    [{ lockDuration: -5 }, /lockDuration/],
    [{ lockDuration: 1.5 }, /lockDuration/],
    [{ lockDuration: '30000' }, /lockDuration/],
    [{ heartbeatInterval: 0 }, /heartbeatInterval/],
    [{ lockDuration: 1000, heartbeatInterval: 1000 }, /heartbeatInterval \(1000 ms\) to be at most half of lockDuration \(1000 ms\)/],
    [{ lockDuration: 500, heartbeatInterval: 490 }, /at most half of lockDuration \(500 ms\).*event-loop pause/],
    [{ lockDuration: 1000, heartbeatInterval: 501 }, /at most half of lockDuration/],
    [{ lockDuration: 1000, heartbeatInterval: 5000 }, /at most half of lockDuration/],
    [{ concurrency: 0 }, /concurrency/],
    [{ concurrency: -1 }, /concurrency/],
    [{ concurrency: 2.5 }, /concurrency/],
    [{ closeTimeout: 0 }, /closeTimeout/],
    [{ closeTimeout: -1 }, /closeTimeout/],
    [{ prefix: 'a{b}' }, /prefix/],
    [{ lockDuraton: 5000 }, /unknown Worker option "lockDuraton" \(did you mean "lockDuration"\?\)/],
    [{ autorun: 'no' }, /expected autorun to be true or false, got: "no"/],
    [{ drainDelay: 0 }, /expected drainDelay to be a positive number of seconds/],
    [{ drainDelay: 601 }, /expected drainDelay to be a positive number of seconds, at most 600/],
    [{ maximumRateLimitDelay: 0 }, /expected maximumRateLimitDelay to be/],
    [{ maximumRateLimitDelay: '5s' }, /expected maximumRateLimitDelay to be/],
    [{ lockRenewTime: 0 }, /expected lockRenewTime to be a positive integer/],
    [{ lockDuration: 1000, lockRenewTime: 800 }, /expected lockRenewTime \(800 ms\) to be at most half of lockDuration/],
    [{ lockRenewTime: 1000, heartbeatInterval: 2000 }, /lockRenewTime is BullMQ's name for heartbeatInterval/],
    [{ metrics: { maxDataPoints: -1 } }, /expected metrics.maxDataPoints to be/],
    [{ metrics: { maxDataPoints: '1w' } }, /expected metrics.maxDataPoints to be/],
    [{ metrics: { maxPoints: 60 } }, /unknown metrics option "maxPoints"/],
    [{ metrics: true }, /metrics/],
    [{ connection: 'http://example' }, /redis:\/\//],
  ])('Worker rejects %j', async (options, message) => {
    const o = options as Record<string, unknown>
    // direct: the constructor’s option validation is under test
    const err = await rejects('ERR_OPTIONS', () => new Worker('q', proc, { connection: redis.client, ...o }))
    expect(err.message).toMatch(message)
  })

  it("Worker takes BullMQ's autorun: true, drainDelay, lockRenewTime (its heartbeat's interval) and metrics", async () => {
    // direct: BullMQ's names among the constructor's options are under test (a literal: its type is checked too)
    const worker = new Worker('q', proc, {
      connection: redis.client,
      autorun: true,
      drainDelay: 5,
      lockDuration: 1_000,
      lockRenewTime: 250,
      // BullMQ's switch to count finished jobs: taken, and every queue counts them anyway (getMetrics).
      metrics: { maxDataPoints: MetricsTime.ONE_WEEK * 2 },
    })
    try {
      expect(await worker.waitUntilReady()).toBeTruthy()
      expect(worker.isRunning()).toBe(true)
      expect((worker as unknown as { core: { settings: { heartbeatInterval: number } } }).core.settings.heartbeatInterval).toBe(250)
    } finally {
      await worker.close()
    }
  })

  it('worker.concurrency refuses a value out of 1..10,000 (ERR_OPTIONS), keeping its own', async () => {
    // direct: the concurrency setter's validation is under test
    const worker = new Worker('q', proc, { connection: redis.client, concurrency: 2, autorun: false })
    try {
      for (const n of [0, -1, 1.5, Number.NaN, '3', 10_001]) {
        expect(() => {
          worker.concurrency = n as number
        }).toThrow(expect.objectContaining({ code: 'ERR_OPTIONS' }))
      }
      expect(worker.concurrency).toBe(2)
    } finally {
      await worker.close()
    }
  })

  it('job.retry refuses resetAttemptsStarted and unknown options (ERR_OPTIONS), changing nothing', async () => {
    const job = await fx.queue.add('x', {})
    await expect(job.retry('failed', { resetAttemptsStarted: true })).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    await expect(job.retry('failed', { resetAttempts: true } as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    expect(await job.getState()).toBe('waiting')
  })

  it('Worker rejects a processor that is not a function', async () => {
    // direct: the constructor’s option validation is under test
    await rejects('ERR_OPTIONS', () => new Worker('q', 'nope' as never, { connection: redis.client }))
  })

  it.each([
    [{ attempts: -1 }, /attempts/],
    [{ attempts: 1.5 }, /attempts/],
    [{ attempt: 3 }, /did you mean "attempts"/],
  ])('add rejects %j', async (options, message) => {
    const err = await rejects('ERR_OPTIONS', () => fx.queue.add('x', {}, options as never))
    expect(err.message).toMatch(message)
  })

  it.each([
    [{ graceMs: -1 }, /graceMs/],
    [{ limit: 0 }, /limit/],
    [{ limit: 100_000 }, /limit/],
    [{ grace: 5 }, /did you mean "graceMs"/],
  ])('sweep rejects %j', async (options, message) => {
    const err = await rejects('ERR_OPTIONS', () => sweep(redis.client, 'q', options as never))
    expect(err.message).toMatch(message)
  })

  it.each([[{ maxDataBytes: 0 }], [{ prefix: '' }], [{ conection: 'redis://x' }]])('Queue rejects %j', async (options) => {
    // direct: the constructor’s option validation is under test
    await rejects('ERR_OPTIONS', () => new Queue('q', options as never))
  })

  it('defaults: heartbeat is half the lease', async () => {
    const { workerSettings, LOCK_DURATION_MS_DEFAULT } = await import('../../lib/options.js')
    expect(workerSettings({ lockDuration: 800 }).heartbeatInterval).toBe(400)
    expect(workerSettings({}).lockDuration).toBe(LOCK_DURATION_MS_DEFAULT)
    expect(workerSettings({}).heartbeatInterval).toBe(15_000)
  })

  it('defaults: the library sweep and the reaper share one grace, which outlasts a default heartbeat interval', async () => {
    const { sweepSettings, workerSettings } = await import('../../lib/options.js')
    const { reaperConfig } = await import('../../lib/reaper/config.js')
    expect(sweepSettings({}).graceMs).toBe(reaperConfig({}, {}).graceMs)
    expect(sweepSettings({}).graceMs).toBeGreaterThanOrEqual(workerSettings({}).heartbeatInterval)
  })
})
