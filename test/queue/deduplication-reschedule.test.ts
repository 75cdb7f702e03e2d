/**
 * Deduplication's `reschedule` (BullMQ 6.7's `deduplication: { id, reschedule: true }`): an add whose id is
 * held by a job still delayed keeps that job (its id and data) and makes it due the add's delay from now,
 * an omitted delay as 0; a holder that left `delayed` is not touched; `replace` wins over it. Emits
 * `deduplicated` then `delayed`, as BullMQ does.
 */
import { describe, expect, it } from 'vitest'
import { QueueEvents } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 400, closeTimeout: 500 } })

async function redisNow(): Promise<number> {
  const [s, us] = await redis.client.time()
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

/** The holder's due time, read from `delayed` (null when it is not there). */
async function dueOf(id: string): Promise<number | null> {
  const score = await redis.client.zscore(fx.keys.delayed, id)
  return score === null ? null : Math.floor(Number(score))
}

describe('deduplication with reschedule', () => {
  it('a delayed holder keeps its id and data, due the new delay from now; deduplicated then delayed are emitted', async () => {
    const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
    await events.waitUntilReady()
    try {
      const opts = { deduplication: { id: 'r', reschedule: true } }
      const seen: string[] = []
      const delays: number[] = []
      events.on('deduplicated', ({ jobId }) => seen.push(`deduplicated ${jobId}`))
      events.on('delayed', ({ jobId, delay }) => {
        seen.push(`delayed ${jobId}`)
        delays.push(Number(delay))
      })
      const a = await fx.queue.add('j', { v: 1 }, { ...opts, delay: 60_000 })
      const before = await redisNow()
      const b = await fx.queue.add('j', { v: 2 }, { ...opts, delay: 5_000 })
      const after = await redisNow()
      expect(b.id).toBe(a.id)
      const due = (await dueOf(a.id as string)) as number
      expect(due).toBeGreaterThanOrEqual(before + 5_000)
      expect(due).toBeLessThanOrEqual(after + 5_000)
      // The add's own `delayed`, then the reschedule's pair, in order, the second `delayed` at the new due time.
      await waitFor(() => delays.length === 2, { what: 'the second delayed event' })
      expect(seen).toEqual([`delayed ${a.id}`, `deduplicated ${a.id}`, `delayed ${a.id}`])
      expect(delays[1]).toBe(due)
      const stored = await fx.queue.getJob(a.id as string)
      expect(stored?.data).toEqual({ v: 1 })
      expect(stored?.delay).toBe(5_000)
      expect(await fx.queue.counts()).toMatchObject({ delayed: 1, wait: 0 })

      // No delay: due now, and it runs with its own data.
      await fx.queue.add('j', { v: 3 }, opts)
      expect(await dueOf(a.id as string)).toBeLessThanOrEqual(await redisNow())
      const w = fx.worker((job) => job.data)
      const [job, result] = await nextEvent<[{ id: string }, unknown]>(w, 'completed')
      expect(job.id).toBe(a.id)
      expect(result).toEqual({ v: 1 })
    } finally {
      await events.close()
    }
  })

  it('a holder that waits (not delayed) is left as it is; so is one held with a ttl after it ran', async () => {
    const a = await fx.queue.add('j', { v: 1 }, { deduplication: { id: 'w', reschedule: true } })
    expect((await fx.queue.add('j', { v: 2 }, { delay: 5_000, deduplication: { id: 'w', reschedule: true } })).id).toBe(a.id)
    expect(await fx.queue.getJobState(a.id as string)).toBe('waiting')
    expect(await dueOf(a.id as string)).toBeNull()

    const t = await fx.queue.add('j', {}, { deduplication: { id: 't', ttl: 60_000, reschedule: true } })
    const w = fx.worker(() => 'ok')
    await nextEvent(w, 'completed')
    await nextEvent(w, 'completed')
    expect((await fx.queue.add('j', {}, { delay: 5_000, deduplication: { id: 't', ttl: 60_000, reschedule: true } })).id).toBe(t.id)
    expect(await fx.queue.getJobState(t.id as string)).toBe('completed')
    expect(await dueOf(t.id as string)).toBeNull()
  })

  it('a holder held with a ttl is rescheduled too; with replace, replace wins', async () => {
    const ttl = { id: 'k', ttl: 60_000, reschedule: true }
    const a = await fx.queue.add('j', { v: 1 }, { delay: 60_000, deduplication: ttl })
    const before = await redisNow()
    expect((await fx.queue.add('j', { v: 2 }, { delay: 2_000, deduplication: ttl })).id).toBe(a.id)
    expect(await dueOf(a.id as string)).toBeLessThan(before + 3_000)

    const both = { id: 'rr', ttl: 60_000, replace: true, reschedule: true }
    const b = await fx.queue.add('j', { v: 1 }, { delay: 60_000, deduplication: both })
    const c = await fx.queue.add('j', { v: 2 }, { delay: 60_000, deduplication: both })
    expect(c.id).not.toBe(b.id)
    expect(await fx.queue.getJob(b.id as string)).toBeUndefined()
  })

  it('in one addBulk: the holder added earlier in the call is rescheduled by a later job', async () => {
    const opts = { deduplication: { id: 'bulk', reschedule: true } }
    const before = await redisNow()
    const [a, b] = await fx.queue.addBulk([
      { name: 'j', data: { v: 1 }, opts: { ...opts, delay: 60_000 } },
      { name: 'j', data: { v: 2 }, opts: { ...opts, delay: 1_000 } },
    ])
    expect(b?.id).toBe(a?.id)
    const due = (await dueOf(a?.id as string)) as number
    expect(due).toBeGreaterThanOrEqual(before + 1_000)
    expect(due).toBeLessThan(before + 10_000)
    expect(await fx.queue.counts()).toMatchObject({ delayed: 1 })
  })
})
