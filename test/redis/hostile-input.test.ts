/**
 * Property-based hostile input: queue names, job ids, job data, options, environment configuration and
 * Lambda events are each accepted, or rejected with an EchoMQError and a code while Redis stays unchanged.
 */
import fc from 'fast-check'
import { beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { EchoMQError, Queue, sweep, Worker } from '../../lib/index.js'
import { addSettings, JOB_DEFAULTS } from '../../lib/job-options.js'
import { sweepSettings, workerSettings } from '../../lib/options.js'
import { reaperConfig } from '../../lib/reaper/config.js'
import { useQueue, useQueues } from '../helpers/fixture.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'

const redis = useRedis()
const fx = useQueue(redis, { queue: { maxDataBytes: 4096 } })
const { open } = useQueues(redis)
beforeEach(async () => {
  await crashedJobs(redis.client, 'q', 2)
})

const QUEUE_NAME = /^[A-Za-z0-9._:-]{1,128}$/
const RESERVED = ['wait', 'active', 'stalled', 'completed', 'failed', 'marker']
/** BullMQ 6.7's custom id rules (no integer, ':' only in three parts) and EchoMQ's length, text and key-name limits. */
function validJobId(id: string): boolean {
  const parts = id.split(':')
  return (
    id.length >= 1 &&
    id.length <= 256 &&
    !/\p{Cc}/u.test(id) &&
    !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(id) &&
    `${Number.parseInt(id, 10)}` !== id &&
    (parts.length === 1 || parts.length === 3) &&
    parts[0] !== '0' &&
    !RESERVED.includes(parts[0] as string) &&
    !/^repeat:[^:]+:\d{1,16}$/.test(id)
  )
}
const runs = { numRuns: 150 }

/** Runs `call`; on rejection, asserts an EchoMQError with one of `codes` and an unchanged Redis. */
async function acceptedOrRejected(call: () => unknown, codes: string[]): Promise<'accepted' | 'rejected'> {
  const before = await snapshot(redis.client)
  try {
    await call()
    return 'accepted'
  } catch (err) {
    expect(err).toBeInstanceOf(EchoMQError)
    expect(codes).toContain((err as EchoMQError).code)
    expect(await snapshot(redis.client)).toEqual(before)
    return 'rejected'
  }
}

const nameLike = fc.oneof(
  fc.string({ maxLength: 140 }),
  fc.string({ unit: fc.constantFrom(...'abcXYZ019._:-{} /\\\n\u00e9*?[]'.split('')), maxLength: 140 }),
  fc.constantFrom(
    ...RESERVED,
    '',
    'x'.repeat(128),
    'x'.repeat(129),
    'x'.repeat(257),
    'a:b',
    'a:b:c',
    'wait:b:c',
    '{q}',
    'a/b@c',
    'repeat:s:12',
  ),
)

describe('queue names', () => {
  it('Queue and sweep accept exactly [A-Za-z0-9._:-]{1,128}', async () => {
    await fc.assert(
      fc.asyncProperty(nameLike, async (name) => {
        const outcome = await acceptedOrRejected(() => sweep(redis.client, name), ['ERR_QUEUE_NAME'])
        expect(outcome === 'accepted').toBe(QUEUE_NAME.test(name))
        let constructed = false
        try {
          // direct: the constructor’s name validation is under test
          new Queue(name, { connection: redis.client })
          constructed = true
        } catch (err) {
          expect((err as EchoMQError).code).toBe('ERR_QUEUE_NAME')
        }
        expect(constructed).toBe(QUEUE_NAME.test(name))
      }),
      runs,
    )
  })
})

describe('job ids', () => {
  it('add accepts exactly BullMQ 6.7\u2019s ids (no integer, \u2018:\u2019 in three parts) of 1-256 characters, minus the queue\u2019s own key names', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(nameLike, fc.integer().map(String)), async (id) => {
        const valid = validJobId(id)
        const outcome = await acceptedOrRejected(() => fx.queue.add('x', { id }, { jobId: id }), ['ERR_JOB_ID'])
        expect(outcome === 'accepted').toBe(valid)
        if (valid) expect((await fx.queue.getJob(id))?.id).toBe(id)
      }),
      runs,
    )
  })
})

describe('job data', () => {
  const hostile = fc.oneof(
    fc.jsonValue(),
    fc.anything(),
    fc.bigInt().map((n) => ({ n })),
    fc.constant(undefined),
    fc.constant(() => 1),
    fc.string({ minLength: 4000, maxLength: 5000 }),
  )
  /** Whether JSON gives back `data` (a property whose value is undefined may be left out, as JSON does). */
  function faithful(parsed: unknown, data: unknown): boolean {
    if (typeof data === 'number') return parsed === data
    if (Array.isArray(data)) return Array.isArray(parsed) && parsed.length === data.length && data.every((v, i) => faithful(parsed[i], v))
    if (data !== null && typeof data === 'object') {
      const proto = Object.getPrototypeOf(data)
      if ((proto !== Object.prototype && proto !== null) || parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
        return false
      const kept = Object.entries(data).filter(([, v]) => v !== undefined)
      return (
        kept.length === Object.keys(parsed).length &&
        kept.every(([k, v]) => Object.hasOwn(parsed, k) && faithful((parsed as Record<string, unknown>)[k], v))
      )
    }
    return parsed === data
  }

  it('JSON data within maxDataBytes that JSON gives back round-trips; anything else is rejected with ERR_JOB_DATA', async () => {
    await fc.assert(
      fc.asyncProperty(hostile, async (data) => {
        let json: string | undefined
        try {
          json = JSON.stringify(data)
        } catch {
          json = undefined
        }
        // No data at all is BullMQ's {} (queue.add(name) with no data).
        const fits = data === undefined || (json !== undefined && Buffer.byteLength(json) <= 4096 && faithful(JSON.parse(json), data))
        const outcome = await acceptedOrRejected(() => fx.queue.add('x', data), ['ERR_JOB_DATA'])
        expect(outcome === 'accepted').toBe(fits)
      }),
      runs,
    )
  })

  it('a job added without data stores {}, as BullMQ stores it', async () => {
    const job = await fx.queue.add('x', undefined)
    expect(job.data).toBeUndefined()
    expect((await fx.queue.getJob(job.id))?.data).toEqual({})
  })

  it('stored data equals its JSON round trip', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (data) => {
        const job = await fx.queue.add('x', data)
        expect((await fx.queue.getJob(job.id))?.data).toEqual(JSON.parse(JSON.stringify(data)))
      }),
      { numRuns: 100 },
    )
  })
})

describe('options', () => {
  const value = fc.oneof(
    fc.integer({ min: -5, max: 100_000 }),
    fc.double(),
    fc.string({ maxLength: 5 }),
    fc.constant(null),
    fc.boolean(),
    fc.constant(undefined),
    fc.record({ type: fc.constantFrom('fixed', 'exponential', 'linear'), delay: fc.integer({ min: -5, max: 5000 }) }),
    fc.record({ count: fc.oneof(fc.integer({ min: -2, max: 50 }), fc.double()), age: fc.integer({ min: -2, max: 5000 }) }),
  )
  const known = [
    ...['concurrency', 'lockDuration', 'heartbeatInterval', 'closeTimeout', 'prefix', 'attempts', 'graceMs', 'limit', 'name'],
    ...['delay', 'backoff', 'removeOnComplete', 'removeOnFail'],
  ]
  const options = fc.dictionary(fc.oneof(fc.constantFrom(...known), fc.string({ maxLength: 8 })), value, { maxKeys: 4 })

  it('validators return settings or throw ERR_OPTIONS, nothing else', () => {
    fc.assert(
      fc.property(options, (o) => {
        for (const validate of [workerSettings, (x: unknown) => addSettings(x, JOB_DEFAULTS), sweepSettings]) {
          try {
            validate(o)
          } catch (err) {
            expect(err).toBeInstanceOf(EchoMQError)
            expect(['ERR_OPTIONS', 'ERR_JOB_ID']).toContain((err as EchoMQError).code)
          }
        }
      }),
      { numRuns: 1000 },
    )
  })

  it('a Worker with rejected options writes nothing to Redis', async () => {
    await fc.assert(
      fc.asyncProperty(options, async (o) => {
        const outcome = await acceptedOrRejected(
          // direct: the constructor’s option validation is under test
          () => workerSettings(o) && new Worker('q', () => 1, { ...o, connection: redis.client }).close(),
          ['ERR_OPTIONS'],
        )
        if (outcome === 'accepted') expect(() => workerSettings(o)).not.toThrow()
      }),
      { numRuns: 60 },
    )
  })
})

describe('environment configuration', () => {
  const names = [
    'REDIS_URL',
    'REDIS_CLUSTER',
    'REDIS_TIMEOUT_MS',
    'QUEUES',
    'PREFIX',
    'SWEEPS_PER_INVOCATION',
    'SWEEP_INTERVAL_MS',
    'SWEEP_GRACE_MS',
    'SWEEP_CONCURRENCY',
    'SWEEP_LIMIT',
    'SWEEP_AUDIT',
    'METRICS_MODE',
    'METRICS_NAMESPACE',
  ]
  const raw = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.integer({ min: -10, max: 10_000_000 }).map(String),
    fc.constantFrom('true', 'false', 'api', 'emf', 'off', 'redis://h:1', 'rediss://u:p@h:2/3', 'a,b'),
  )
  it('is read into a config or rejected with ERR_CONFIG naming the variable', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...names), raw, { maxKeys: 5 }), (env) => {
        try {
          reaperConfig({}, env)
        } catch (err) {
          expect(err).toBeInstanceOf(EchoMQError)
          expect((err as EchoMQError).code).toBe('ERR_CONFIG')
          expect(names.some((n) => (err as Error).message.startsWith(`${n}:`))).toBe(true)
        }
      }),
      { numRuns: 1000 },
    )
  })
})

describe('Lambda events', () => {
  it('any event is swept or rejected with ERR_EVENT, and a rejected one changes nothing', async () => {
    vi.spyOn(console, 'log').mockImplementation(() => undefined)
    vi.spyOn(console, 'error').mockImplementation(() => undefined)
    const handler = createHandler({ REDIS_URL: redis.url, METRICS_MODE: 'off', SWEEP_GRACE_MS: '3600000' })
    const event = fc.oneof(
      fc.anything(),
      fc.record({ queues: fc.array(nameLike, { maxLength: 3 }) }),
      fc.constant({ 'detail-type': 'Scheduled Event', source: 'aws.events' }),
    )
    await fc.assert(
      fc.asyncProperty(event, async (e) => {
        await acceptedOrRejected(() => handler(e, { getRemainingTimeInMillis: () => 50_000 }), ['ERR_EVENT'])
      }),
      { numRuns: 100 },
    )
    await handler.close()
    vi.restoreAllMocks()
  })
})

describe('keys of the wrong type', () => {
  it('give a clear error for that queue only', async () => {
    const other = open('other')
    await redis.client.set('emq:{bad}:wait', 'not a list')
    const bad = open('bad')

    const err = await bad.add('x', {}).catch((e: unknown) => e)

    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe('ERR_WRONG_TYPE')
    expect((err as Error).message).toMatch(/queue bad|bad:/)
    await expect(other.add('x', {})).resolves.toMatchObject({ state: 'wait' })
    await expect(bad.counts()).rejects.toMatchObject({ code: 'ERR_WRONG_TYPE' })
  })
})

describe('the options and calls of events, progress, logs, bulk adds and clean-up', () => {
  const anything = fc.oneof(
    fc.integer({ min: -5, max: 5 }),
    fc.double(),
    fc.string({ maxLength: 5 }),
    fc.constantFrom(null, true, NaN, Infinity, -1, 1.5, 2 ** 60, [], {}, () => 1),
  )

  it('keepLogs, streams.events.maxLen and the QueueEvents options: accepted or ERR_OPTIONS, nothing written', async () => {
    await fc.assert(
      fc.asyncProperty(anything, async (value) => {
        await acceptedOrRejected(() => fx.queue.add('x', {}, { keepLogs: value as never }), ['ERR_OPTIONS'])
        await acceptedOrRejected(
          // direct: the constructor’s option validation is under test
          () => new Queue('q', { connection: redis.client, streams: { events: { maxLen: value as never } } }),
          ['ERR_OPTIONS'],
        )
        for (const option of ['blockingTimeout', 'lastEventId', 'autorun']) {
          await acceptedOrRejected(async () => {
            const { QueueEvents } = await import('../../lib/index.js')
            const events = new QueueEvents('q', { connection: redis.client, autorun: false, [option]: value } as never)
            await events.close()
          }, ['ERR_OPTIONS'])
        }
      }),
      { numRuns: 60 },
    )
  })

  it('getJobs, getJobCounts, getJobLogs, clean, drain and obliterate: accepted or ERR_OPTIONS/ERR_JOB_ID, nothing changed', async () => {
    await fc.assert(
      fc.asyncProperty(anything, anything, async (a, b) => {
        await acceptedOrRejected(() => fx.queue.getJobs(a as never, b as never), ['ERR_OPTIONS'])
        await acceptedOrRejected(() => fx.queue.getJobCounts(a as never), ['ERR_OPTIONS'])
        await acceptedOrRejected(() => fx.queue.getJobLogs(a as never, b as never), ['ERR_OPTIONS', 'ERR_JOB_ID'])
        await acceptedOrRejected(() => fx.queue.clean(a as never, b as never, 'failed'), ['ERR_OPTIONS'])
        if (typeof a !== 'boolean' && a !== undefined) await acceptedOrRejected(() => fx.queue.drain(a as never), ['ERR_OPTIONS'])
        if (a !== undefined && a !== null && typeof a === 'object' && Object.keys(a).length === 0) return
        await acceptedOrRejected(() => fx.queue.obliterate(a as never), ['ERR_OPTIONS'])
      }),
      { numRuns: 60 },
    )
  })

  it('addBulk: a bad entry anywhere rejects the whole call with nothing written', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 30 }), anything, async (at, bad) => {
        const jobs: unknown[] = Array.from({ length: 30 }, (_, i) => ({ name: 'x', data: { i } }))
        jobs.splice(at, 0, { name: 'x', data: {}, opts: { attempts: bad } })
        await acceptedOrRejected(() => fx.queue.addBulk(jobs as never), ['ERR_OPTIONS'])
      }),
      { numRuns: 40 },
    )
  })
})

describe('the options of priorities, limiters and job schedulers', () => {
  const anything = fc.oneof(
    fc.integer({ min: -5, max: 3_000_000 }),
    fc.double(),
    fc.string({ maxLength: 12 }),
    fc.constantFrom(null, true, NaN, Infinity, -1, 1.5, 2 ** 21, 2 ** 21 - 1, [], {}, '* * * * *', 'Europe/Paris', 'Mars/Base'),
  )

  it('priority and lifo: accepted or ERR_OPTIONS, nothing written', async () => {
    await fc.assert(
      fc.asyncProperty(anything, async (value) => {
        await acceptedOrRejected(() => fx.queue.add('x', {}, { priority: value as never }), ['ERR_OPTIONS'])
        await acceptedOrRejected(() => fx.queue.add('x', {}, { lifo: value as never }), ['ERR_OPTIONS'])
      }),
      { numRuns: 80 },
    )
  })

  it('a limiter: constructed or ERR_OPTIONS', () => {
    fc.assert(
      fc.property(anything, anything, (max, duration) => {
        try {
          // direct: the constructor’s option validation is under test
          new Worker('q', () => undefined, { connection: redis.url, limiter: { max, duration } as never }).close()
        } catch (err) {
          expect((err as EchoMQError).code).toBe('ERR_OPTIONS')
        }
      }),
      { numRuns: 80 },
    )
  })

  it('upsertJobScheduler: every, pattern, tz, limit, dates and the template: accepted or ERR_OPTIONS/ERR_JOB_ID, nothing written', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('every', 'pattern', 'tz', 'limit', 'startDate', 'endDate', 'offset', 'immediately'),
        anything,
        async (key, value) => {
          const repeat = key === 'every' || key === 'pattern' ? { [key]: value } : { every: 60_000, [key]: value }
          const outcome = await acceptedOrRejected(
            () => fx.queue.upsertJobScheduler('s', repeat as never, { data: {} }),
            ['ERR_OPTIONS', 'ERR_JOB_ID'],
          )
          if (outcome === 'accepted') await fx.queue.removeJobScheduler('s')
          await acceptedOrRejected(() => fx.queue.upsertJobScheduler(value as never, { every: 1000 }), ['ERR_OPTIONS', 'ERR_JOB_ID'])
          await fx.queue.removeJobScheduler('s').catch(() => undefined)
        },
      ),
      { numRuns: 80 },
    )
  })
})
