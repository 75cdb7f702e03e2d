/**
 * QueueEvents on a real Redis: BullMQ's events and payloads from every process that touches the queue
 * (producer, worker, sweep), in order, with the event id second; no event missed after waitUntilReady;
 * the stream capped near its limit; nothing written while nobody listens (the last listener closed), while
 * a listener closing leaves the others heard; waitUntilFinished, many at once. A Redis that lost its data:
 * events-restart.test.ts.
 */
import type { EventEmitter } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { EchoMQError, type Job, Queue, QueueEvents, sweep, UnrecoverableError } from '../../lib/index.js'
import { LISTEN_TTL_MS } from '../../lib/queue-events.js'
import { useQueue } from '../helpers/fixture.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })
const listeners: QueueEvents[] = []

afterEach(async () => {
  await Promise.all(listeners.splice(0).map((l) => l.close()))
})

async function listen(options: Record<string, unknown> = {}): Promise<QueueEvents> {
  const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200, ...options })
  listeners.push(events)
  await events.waitUntilReady()
  return events
}

/** Every event (name, payload, id) a listener hears, in order. */
function record(events: QueueEvents, names: string[]): [string, unknown, unknown][] {
  const heard: [string, unknown, unknown][] = []
  // Any name, as a string: the typed on() takes BullMQ's names one at a time.
  for (const name of names) (events as EventEmitter).on(name, (payload: unknown, id: unknown) => heard.push([name, payload, id]))
  return heard
}

const ALL = ['added', 'waiting', 'delayed', 'active', 'progress', 'completed', 'failed', 'retries-exhausted', 'stalled', 'removed']

describe('QueueEvents', () => {
  it('hears a job added, waiting, active, its progress and completed, in order, with the event id second', async () => {
    const events = await listen()
    const heard = record(events, ALL)
    fx.worker(async (job: Job) => {
      await job.updateProgress({ done: 1 })
      return { ok: true }
    })
    const job = await fx.queue.add('send', { to: 'a' }, { jobId: 'a' })
    await waitFor(() => heard.some(([name]) => name === 'completed'), { what: 'completed' })

    expect(heard.map(([name, payload]) => [name, payload])).toEqual([
      ['added', { jobId: 'a', name: 'send' }],
      ['waiting', { jobId: 'a' }],
      ['active', { jobId: 'a', prev: 'waiting' }],
      ['progress', { jobId: 'a', data: { done: 1 } }],
      ['completed', { jobId: 'a', returnvalue: { ok: true }, prev: 'active' }],
    ])
    expect(heard.every(([, , id]) => typeof id === 'string' && /^\d+-\d+$/.test(id as string))).toBe(true)
    expect(job.id).toBe('a')
  })

  it('a retry is waiting or delayed (its due time), a final failure failed then retries-exhausted', async () => {
    const events = await listen()
    const heard = record(events, ALL)
    fx.worker(() => {
      throw new Error('down')
    })
    await fx.queue.add('x', {}, { jobId: 'now', attempts: 2 })
    await fx.queue.add('x', {}, { jobId: 'later', attempts: 2, backoff: 50 })
    await waitFor(() => heard.filter(([name]) => name === 'retries-exhausted').length === 2, { what: 'both exhausted' })

    const of = (id: string) => heard.filter(([, p]) => (p as { jobId: string }).jobId === id).map(([name, p]) => [name, p])
    expect(of('now')).toContainEqual(['waiting', { jobId: 'now', prev: 'active' }])
    const delayed = of('later').find(([name]) => name === 'delayed')?.[1] as { delay: number }
    expect(delayed.delay).toBeGreaterThan(Date.now() - 10_000)
    expect(of('later').slice(-2)).toEqual([
      ['failed', { jobId: 'later', failedReason: 'down', prev: 'active' }],
      ['retries-exhausted', { jobId: 'later', attemptsMade: '2' }],
    ])
  })

  it('an UnrecoverableError is failed at once, without retries-exhausted while attempts remain', async () => {
    const events = await listen()
    const heard = record(events, ALL)
    fx.worker(() => {
      throw new UnrecoverableError('bad input')
    })
    await fx.queue.add('x', {}, { jobId: 'u', attempts: 3 })
    const failed = await nextEvent<[{ failedReason: string }]>(events, 'failed:u')

    expect(failed[0].failedReason).toBe('bad input')
    expect(heard.map(([name]) => name)).not.toContain('retries-exhausted')
    expect(await fx.queue.getJob('u')).toMatchObject({ state: 'failed', attemptsMade: 1 })
  })

  it('the sweep recovering a stalled job emits waiting then stalled; one stalled past maxStalledCount stalled then failed', async () => {
    const twice = await crashedJobs(redis.client, 'q', 2, { attempts: 1 })
    for (const id of twice) await redis.client.hset(fx.keys.job(id), 'stalledCounter', '1') // stalled once before
    await crashedJobs(redis.client, 'q', 1, { attempts: 2, idPrefix: 'r' })
    const events = await listen()
    const heard = record(events, ALL)
    await sweep(redis.client, 'q', { graceMs: 0 })
    await sweep(redis.client, 'q', { graceMs: 0 })
    await waitFor(() => heard.length >= 6, { what: 'the sweep events' })

    expect(heard.filter(([, p]) => (p as { jobId: string }).jobId === 'r0').map(([name, p]) => [name, p])).toEqual([
      ['waiting', { jobId: 'r0', prev: 'active' }],
      ['stalled', { jobId: 'r0' }],
    ])
    expect(heard.filter(([name]) => name === 'failed').map(([, p]) => (p as { jobId: string }).jobId)).toEqual(['j0', 'j1'])
    // As BullMQ's: stalled, then failed.
    expect(heard.filter(([, p]) => (p as { jobId: string }).jobId === 'j0').map(([name]) => name)).toEqual(['stalled', 'failed'])
  })

  it('removed, paused, resumed, duplicated and drained', async () => {
    const events = await listen()
    const heard = record(events, [...ALL, 'paused', 'resumed', 'duplicated'])
    const drained: unknown[] = []
    events.on('drained', (...args: unknown[]) => drained.push(args))
    await fx.queue.add('x', {}, { jobId: 'gone', delay: 60_000 })
    await fx.queue.remove('gone')
    await fx.queue.add('x', {}, { jobId: 'twice' })
    await fx.queue.add('x', {}, { jobId: 'twice' })
    await fx.queue.pause()
    await fx.queue.resume()
    fx.worker(() => 'ok')
    await waitFor(() => drained.length === 1, { what: 'drained' })

    const names = heard.map(([name, p]) => [name, p])
    expect(names).toContainEqual(['removed', { jobId: 'gone', prev: 'delayed' }])
    expect(names).toContainEqual(['duplicated', { jobId: 'twice' }])
    expect(names).toContainEqual(['paused', {}])
    expect(names).toContainEqual(['resumed', {}])
    // drained is BullMQ's: the event id alone.
    expect(drained[0]).toEqual([expect.stringMatching(/^\d+-\d+$/)])
  })

  it('no event after waitUntilReady is missed; lastEventId 0-0 replays the stream', async () => {
    const events = await listen()
    const added = record(events, ['added'])
    await fx.queue.add('x', {}, { jobId: 'first' })
    await waitFor(() => added.length === 1, { what: 'the first add' })

    const replay = await listen({ lastEventId: '0-0' })
    const replayed = record(replay, ['added', 'waiting'])
    await waitFor(() => replayed.length === 2, { what: 'the replay' })
    expect(replayed.map(([name]) => name)).toEqual(['added', 'waiting'])
  })

  it('the stream is capped near streams.events.maxLen (whole nodes trimmed, as BullMQ does)', async () => {
    // direct: a second Queue object of the queue, with its own streams option (the cap under test)
    const capped = new Queue('q', { connection: redis.client, streams: { events: { maxLen: 20 } } })
    await waitFor(async () => (await redis.client.hget(fx.keys.meta, 'maxLenEvents')) === '20', { what: 'the cap recorded' })
    await listen()
    for (let i = 0; i < 200; i++) await capped.add('x', {})
    // 400 events written; a stream node holds at most 100 entries (stream-node-max-entries).
    const length = await redis.client.xlen(fx.keys.events)
    expect(length).toBeGreaterThanOrEqual(20)
    expect(length).toBeLessThanOrEqual(20 + 100)
  })

  it('costs nothing at rest: with no listener, or after the listener went, no stream is written', async () => {
    fx.worker(() => 'ok')
    for (let i = 0; i < 5; i++) await fx.queue.add('x', {})
    await waitFor(async () => (await fx.queue.counts()).completed === 5, { what: 'five done' })
    expect(await redis.client.exists(fx.keys.events, fx.keys.listened)).toBe(0)

    const events = await listen()
    expect(await redis.client.pttl(fx.keys.listened)).toBeGreaterThan(LISTEN_TTL_MS - 5_000)
    await fx.queue.add('x', {})
    expect(await redis.client.xlen(fx.keys.events)).toBeGreaterThan(0)
    // The last listener closed takes its mark with it: the scripts stop writing at once.
    await events.close()
    expect(await redis.client.exists(fx.keys.listened)).toBe(0)
    await redis.client.del(fx.keys.events)
    await fx.queue.add('x', {})
    expect(await redis.client.exists(fx.keys.events)).toBe(0)
  })

  it('a listener that throws: its Error reaches `error` as thrown (BullMQ’s), and the reading goes on', async () => {
    const events = await listen()
    const bug = new RangeError('listener bug')
    const errors: unknown[] = []
    events.on('error', (err) => errors.push(err))
    events.on('added', () => {
      throw bug
    })
    const heard = record(events, ['waiting'])
    await fx.queue.add('x', {}, { jobId: 'e1' })
    await fx.queue.add('x', {}, { jobId: 'e2' })
    await waitFor(() => heard.length === 2, { what: 'both jobs heard' })
    expect(errors).toEqual([bug, bug])
    expect(errors[0]).toBe(bug)
  })

  it('refuses bad options with ERR_OPTIONS before connecting', () => {
    for (const options of [{ blockingTimeout: 0 }, { lastEventId: 'soon' }, { autorun: 'yes' }, { blockingTimeOut: 5 }]) {
      expect(() => new QueueEvents('q', { connection: redis.url, ...options } as never)).toThrow(
        expect.objectContaining({ code: 'ERR_OPTIONS' }),
      )
    }
    expect(() => new QueueEvents('bad name!', { connection: redis.url })).toThrow(expect.objectContaining({ code: 'ERR_QUEUE_NAME' }))
  })
})

describe('job.waitUntilFinished', () => {
  it('resolves to the return value; rejects with the failure reason', async () => {
    const events = await listen()
    fx.worker((job: Job) => {
      if ((job.data as { fail?: boolean }).fail) throw new Error('it broke')
      return { sum: 3 }
    })
    const ok = await fx.queue.add('x', {})
    const bad = await fx.queue.add('x', { fail: true }, { attempts: 1 })

    await expect(ok.waitUntilFinished(events)).resolves.toEqual({ sum: 3 })
    const err = await bad.waitUntilFinished(events).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(EchoMQError)
    expect(err).toMatchObject({ code: 'ERR_JOB_FAILED', message: 'it broke' })
  })

  it('a listener goes on hearing the queue after obliterate (its presence is not the queue data obliterate deletes)', async () => {
    const events = await listen()
    await fx.queue.add('x', {})
    await fx.queue.obliterate({ force: true })
    fx.worker(() => 'after')
    const job = await fx.queue.add('x', {})
    await expect(job.waitUntilFinished(events, 5_000)).resolves.toBe('after')
  })

  it('answers at once for a job that finished before the call, from add, getJob and addBulk jobs alike', async () => {
    const events = await listen()
    const w = fx.worker(() => 'done')
    const [job] = await fx.queue.addBulk([{ name: 'x', data: {} }])
    await waitFor(async () => (await fx.queue.getJob(job?.id as string))?.state === 'completed', { what: 'done' })
    await w.close()

    await expect(job?.waitUntilFinished(events)).resolves.toBe('done')
    await expect((await fx.queue.getJob(job?.id as string))?.waitUntilFinished(events)).resolves.toBe('done')
  })

  it('rejects with ERR_TIMEOUT after ttl, and ERR_JOB_MISSING for a job removed', async () => {
    const events = await listen()
    const slow = await fx.queue.add('slow', {}, { jobId: 'slow' })
    await expect(slow.waitUntilFinished(events, 100)).rejects.toMatchObject({
      code: 'ERR_TIMEOUT',
      message: 'Job wait slow timed out before finishing, no finish notification arrived after 100ms (id=slow)',
    })
    await fx.queue.remove('slow')
    await expect(slow.waitUntilFinished(events)).rejects.toMatchObject({ code: 'ERR_JOB_MISSING' })
  })

  it('refuses something that is not a QueueEvents of the job\u2019s queue', async () => {
    const job = await fx.queue.add('x', {})
    const other = new QueueEvents('other', { connection: redis.url })
    listeners.push(other)
    await expect(job.waitUntilFinished({})).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    await expect(job.waitUntilFinished(other)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  })
})

describe('a closed QueueEvents', () => {
  it('waitUntilReady() after close() rejects with ERR_CLOSED', async () => {
    const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
    await events.waitUntilReady()
    await events.close()
    await expect(events.waitUntilReady()).rejects.toMatchObject({ code: 'ERR_CLOSED' })
  })

  it('leaves the other listeners of the queue listening, however long their own marks last', async () => {
    const long = await listen({ blockingTimeout: 100_000 }) // its mark lasts 300 s
    const short = await listen()
    // The short mark never cuts the long one's: the key lives as long as the longest mark.
    expect(await redis.client.pttl(fx.keys.listened)).toBeGreaterThan(LISTEN_TTL_MS)
    await short.close()
    expect(await redis.client.pttl(fx.keys.listened)).toBeGreaterThan(LISTEN_TTL_MS)

    const heard = record(long, ['added'])
    await fx.queue.add('x', {}, { jobId: 'after' })
    await waitFor(() => heard.length === 1, { what: 'the added event heard by the listener left' })
    expect(heard[0]?.[1]).toEqual({ jobId: 'after', name: 'x' })
  })
})

describe('many waitUntilFinished on one QueueEvents', () => {
  it('wait together without a MaxListenersExceededWarning, on many jobs and on one', async () => {
    const warnings: Error[] = []
    const onWarning = (w: Error) => warnings.push(w)
    process.on('warning', onWarning)
    try {
      const events = await listen()
      const jobs = await Promise.all(Array.from({ length: 30 }, (_, i) => fx.queue.add('x', { i })))
      const first = jobs[0] as Job
      const waits = [
        ...jobs.map((job) => job.waitUntilFinished(events, 10_000)),
        ...jobs.map(() => first.waitUntilFinished(events, 10_000)),
      ]
      fx.worker((job: Job) => (job.data as { i: number }).i)
      expect(await Promise.all(waits)).toEqual([...jobs.map((_, i) => i), ...jobs.map(() => 0)])
      // A warning is emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message)).toEqual([])
      expect(events.listenerCount('closing')).toBe(0)
    } finally {
      process.off('warning', onWarning)
    }
  })
})
