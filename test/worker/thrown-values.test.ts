/**
 * What a processor throws that is not an Error is stored as BullMQ stores it: the reason is the thrown
 * value's `message`, and a value with none is stored as "null" (BullMQ's failedReason for it), never
 * "[object Object]"; the `failed` event gets the value as it was thrown.
 */
import { expect, it } from 'vitest'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, skipStalledCheck: true } })

const cases: [string, unknown, string][] = [
  ['object with a code', { code: 'E_GATEWAY' }, 'null'],
  ['object with a message', { message: 'upstream said no', code: 'E_UP' }, 'upstream said no'],
  ['string', 'boom', 'null'],
  ['undefined', undefined, 'null'],
]

for (const [what, thrown, reason] of cases) {
  it(`a thrown ${what} is stored as ${JSON.stringify(reason)} and reaches the failed event as thrown`, async () => {
    const w = fx.worker(() => {
      throw thrown
    })
    const [[, err]] = await Promise.all([nextEvent<[unknown, unknown]>(w, 'failed'), fx.queue.add('x', {}, { jobId: 'j' })])

    expect(err).toBe(thrown)
    const job = await fx.queue.getJob('j')
    expect(job).toMatchObject({ state: 'failed', failedReason: reason })
    expect(job?.failedReason).not.toBe('[object Object]')
  })
}

// Values that throw when read: a getter on message or name, a Proxy that throws on every look. Each fails its
// job like any error (its reason says what happened), frees its slot (the next job of a worker at concurrency 1
// runs) and starts once: none escapes the run as an unhandled rejection.
const hostile: [string, () => unknown][] = [
  [
    'object whose message getter throws',
    () => ({
      get message(): string {
        throw new Error('getter boom')
      },
    }),
  ],
  [
    'Error whose message getter throws',
    () =>
      Object.defineProperty(new Error('x'), 'message', {
        get() {
          throw new Error('getter boom')
        },
      }),
  ],
  [
    'Proxy that throws on every look',
    () =>
      new Proxy(
        {},
        {
          get() {
            throw new Error('proxy boom')
          },
          getPrototypeOf() {
            throw new Error('proxy boom')
          },
        },
      ),
  ],
]

for (const [what, make] of hostile) {
  it(`a thrown ${what} fails its job, frees its slot and runs once`, async () => {
    const w = fx.worker(
      (job) => {
        if (job.name === 'bad') throw make()
        return 'ok'
      },
      { concurrency: 1 },
    )
    const failed = nextEvent<[unknown, unknown]>(w, 'failed')
    const completed = nextEvent(w, 'completed')
    await fx.queue.add('bad', {}, { jobId: 'bad' })
    await fx.queue.add('good', {}, { jobId: 'good' })
    await Promise.all([failed, completed])

    const bad = await fx.queue.getJob('bad')
    expect(bad).toMatchObject({ state: 'failed', attemptsMade: 1, attemptsStarted: 1 })
    expect(bad?.failedReason).toContain('could not be read')
    expect(await fx.queue.getJob('good')).toMatchObject({ state: 'completed', returnvalue: 'ok' })
  })
}
