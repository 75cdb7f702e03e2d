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
