/**
 * Removing a job where BullMQ's lock check decides (remove-22.lua): a job whose lease lapsed is not in flight
 * and goes, as BullMQ removes an active job whose lock is gone; a job scheduler's pending run is refused, as
 * BullMQ's remove refuses it, and drain keeps it (lib/queue/cleanup.ts), as BullMQ's drain does.
 */
import { expect, it } from 'vitest'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 300, skipStalledCheck: true } })
const manual = () => fx.worker(null as never)

it('an active job is kept while its lease lives, and removed once it lapsed: its late finish is refused', async () => {
  const worker = manual()
  await fx.queue.add('j', {}, { jobId: 'lapsing' })
  const job = await worker.getNextJob('t', { block: false })
  expect(job?.id).toBe('lapsing')
  expect(await fx.queue.remove('lapsing')).toBe(0)
  await expect(fx.queue.removeJob('lapsing')).rejects.toMatchObject({ code: 'ERR_JOB_ACTIVE' })

  await waitFor(async () => (await redis.client.exists(fx.keys.lock('lapsing'))) === 0, { what: 'the lease lapsed' })
  // A sweep's mark, as a first sweep would leave it: it goes with the job.
  await redis.client.zadd(fx.keys.stalled, 0, 'lapsing')
  const removed: string[] = []
  fx.queue.on('removed', (id) => removed.push(String(id)))
  expect(await fx.queue.remove('lapsing')).toBe(1)
  expect(removed).toEqual(['lapsing'])
  expect(await fx.queue.getJob('lapsing')).toBeUndefined()
  expect(await redis.client.zcard(fx.keys.active)).toBe(0)
  expect(await redis.client.zcard(fx.keys.stalled)).toBe(0)
  await expect(job?.moveToCompleted('late', 't', false)).rejects.toMatchObject({ message: expect.stringContaining('lapsing') })
  expect(await fx.queue.getJob('lapsing')).toBeUndefined()
})

it('a job scheduler\u2019s pending run is refused by remove, removeJob and job.remove, with nothing changed', async () => {
  const run = await fx.queue.upsertJobScheduler('beat', { every: 60_000 }, { name: 'tick' })
  const id = run?.id as string
  for (const call of [() => fx.queue.remove(id), () => fx.queue.removeJob(id), () => (run as NonNullable<typeof run>).remove()]) {
    await expect(call()).rejects.toMatchObject({ code: 'ERR_JOB_STATE', message: expect.stringContaining("removeJobScheduler('beat')") })
  }
  expect((await fx.queue.getJob(id))?.state).toBe('wait')
  // Once run, it is no longer the pending one (the next run is): it goes as any job.
  const worker = manual()
  const taken = await worker.getNextJob('t', { block: false })
  await taken?.moveToCompleted('ok', 't', false)
  const next = `repeat:beat:${Number(id.split(':')[2]) + 60_000}`
  await waitFor(async () => (await fx.queue.getJob(next))?.state === 'delayed', { what: 'the next run made' })
  await expect(fx.queue.remove(next)).rejects.toMatchObject({ code: 'ERR_JOB_STATE' })
  expect(await fx.queue.remove(id)).toBe(1)
  expect(await fx.queue.getJob(id)).toBeUndefined()
  expect(await fx.queue.removeJobScheduler('beat')).toBe(true)
  expect(await fx.queue.getJob(next)).toBeUndefined()
})

it('drain keeps each scheduler\u2019s pending run, waiting or delayed, and releases the deduplication ids it drains', async () => {
  const first = await fx.queue.upsertJobScheduler('now', { every: 60_000 })
  const later = await fx.queue.upsertJobScheduler('later', { every: 60_000, startDate: Date.now() + 3_600_000 })
  await fx.queue.addBulk(Array.from({ length: 300 }, (_, i) => ({ name: 'j', data: {}, opts: { deduplication: { id: `d${i}` } } })))
  await fx.queue.add('d', {}, { delay: 60_000 })
  await fx.queue.add('p', {}, { priority: 3 })

  await fx.queue.drain(true)
  expect(await fx.queue.getJobCounts('waiting', 'delayed', 'prioritized')).toEqual({ waiting: 1, delayed: 1, prioritized: 0 })
  expect((await fx.queue.getJob(first?.id as string))?.state).toBe('wait')
  expect((await fx.queue.getJob(later?.id as string))?.state).toBe('delayed')
  expect((await redis.client.hkeys(fx.keys.meta)).filter((f) => f.startsWith('de:'))).toEqual([])
})

it('clean of the waiting states keeps a scheduler\u2019s pending run, its first one included, as drain and remove do', async () => {
  const first = await fx.queue.upsertJobScheduler('soon', { every: 60_000 })
  const later = await fx.queue.upsertJobScheduler('late', { every: 60_000, startDate: Date.now() + 3_600_000 })
  await fx.queue.add('j', {}, { jobId: 'plain' })
  await fx.queue.add('d', {}, { jobId: 'held', delay: 60_000 })
  expect(await fx.queue.clean(0, 0, 'wait')).toEqual(['plain'])
  expect(await fx.queue.clean(0, 0, 'delayed')).toEqual(['held'])
  expect((await fx.queue.getJob(first?.id as string))?.state).toBe('wait')
  expect((await fx.queue.getJob(later?.id as string))?.state).toBe('delayed')
})

it('removing a deduplication holder ends its hold with a ttl too (remove, drain, clean), as BullMQ\u2019s remove', async () => {
  const held = (id: string) => fx.queue.getDeduplicationJobId(id)
  const a = await fx.queue.add('j', {}, { deduplication: { id: 'r', ttl: 60_000 } })
  const b = await fx.queue.add('j', {}, { deduplication: { id: 'd', ttl: 60_000 } })
  const c = await fx.queue.add('j', {}, { delay: 60_000, deduplication: { id: 'c', ttl: 60_000 } })
  expect(await fx.queue.remove(a.id)).toBe(1)
  expect(await held('r')).toBeNull()
  await fx.queue.drain()
  expect(await held('d')).toBeNull()
  expect(await fx.queue.clean(0, 0, 'delayed')).toEqual([c.id])
  expect(await held('c')).toBeNull()
  // A new add with each id is a new job, which runs.
  const again = await fx.queue.add('j', {}, { deduplication: { id: 'r', ttl: 60_000 } })
  expect(again.id).not.toBe(a.id)
  expect((await fx.queue.getJob(again.id))?.state).toBe('wait')
  expect(b.id).not.toBe(again.id)
})

it('a removed job that no longer holds its deduplication id leaves the new holder\u2019s hold alone', async () => {
  const old = await fx.queue.add('j', {}, { deduplication: { id: 'k', ttl: 60_000 } })
  expect(await fx.queue.removeDeduplicationKey('k')).toBe(1)
  const holder = await fx.queue.add('j', {}, { deduplication: { id: 'k', ttl: 60_000 } })
  expect(await fx.queue.remove(old.id)).toBe(1)
  expect(await fx.queue.getDeduplicationJobId('k')).toBe(holder.id)
})
