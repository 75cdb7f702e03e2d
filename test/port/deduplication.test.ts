/**
 * BullMQ's tests of deduplication (tests/deduplication.test.ts), ported, run on BullMQ 6.7 and on EchoMQ.
 * Left out: `keepLastIfActive` (its cases are in deduplication-keep-last.test.ts), and the
 * reading of BullMQ's events stream by its key (read here through QueueEvents). Where BullMQ's cases wait
 * fixed times for a ttl to run out, these poll getDeduplicationJobId until the id is free.
 */
import type { Job, JobsOptions, QueueEvents } from 'bullmq'
import { beforeEach, describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { counted, differs, first, gate, LIBRARIES, settled, until, usePort } from './adapter.js'

const redis = useRedis()

interface Deduplicated {
  jobId: string
  deduplicationId: string
  deduplicatedJobId: string
}

describe.each(LIBRARIES)('%s: deduplication', (name) => {
  const t = usePort(redis, name)
  let events: QueueEvents
  let deduplicated: Deduplicated[]

  beforeEach(async () => {
    events = await t.events()
    deduplicated = []
    events.on('deduplicated', (payload) => deduplicated.push(payload))
  })

  /** Until the deduplication id is held by no job (its ttl ran out). */
  const freed = (id: string) => waitFor(async () => (await t.queue.getDeduplicationJobId(id)) === null, { what: `${id} freed` })

  it('an add with a held id adds nothing and emits deduplicated', async () => {
    await t.queue.add('test', { foo: 'bar' }, { jobId: 'a1', deduplication: { id: 'dedupId' } })
    await t.queue.add('test', { foo: 'bar' }, { jobId: 'a2', deduplication: { id: 'dedupId' } })
    expect(await t.queue.getJob('a1')).toBeDefined()
    expect(await t.queue.getJob('a2')).toBeUndefined()
    await settled(events, t.queue)
    expect(deduplicated).toEqual([{ jobId: 'a1', deduplicationId: 'dedupId', deduplicatedJobId: 'a2' }])
  })

  it('queue.removeDeduplicationKey stops deduplication while the holder runs', async () => {
    const hold = gate()
    const removed = first<string>()
    const completed = counted<[Job]>(2)
    const worker = t.worker(async (job) => {
      if (job.id === 'a1') {
        await t.queue.removeDeduplicationKey(job.deduplicationId as string)
        removed.listener(job.id)
        await hold.passed
      }
    })
    worker.on('completed', completed.listener)
    await t.queue.add('test', { foo: 'bar' }, { jobId: 'a1', deduplication: { id: 'dedupId' } })
    await removed.value
    await t.queue.add('test', { foo: 'bar' }, { jobId: 'a2', deduplication: { id: 'dedupId' } })
    hold.open()
    const jobs = (await completed.done).map(([job]) => job)
    expect(jobs.map((job) => job.id).sort()).toEqual(['a1', 'a2'])
    expect(jobs.map((job) => job.deduplicationId)).toEqual(['dedupId', 'dedupId'])
  })

  it('job.removeDeduplicationKey stops deduplication while the job holds the id (true)', async () => {
    const hold = gate()
    const removed = first<boolean>()
    const completed = counted<[Job]>(2)
    t.worker(async (job) => {
      if (job.id === 'a1') {
        removed.listener(await job.removeDeduplicationKey())
        await hold.passed
      }
    }).on('completed', completed.listener)
    await t.queue.add('test', { foo: 'bar' }, { jobId: 'a1', deduplication: { id: 'dedupId' } })
    expect(await removed.value).toBe(true)
    await t.queue.add('test', { foo: 'bar' }, { jobId: 'a2', deduplication: { id: 'dedupId' } })
    hold.open()
    const jobs = (await completed.done).map(([job]) => job)
    expect(jobs.map((job) => job.id).sort()).toEqual(['a1', 'a2'])
    expect(jobs.map((job) => job.deduplicationId)).toEqual(['dedupId', 'dedupId'])
  })

  it('job.removeDeduplicationKey leaves the id alone once another job holds it (false)', async () => {
    const hold = gate()
    const removed = first<boolean>()
    const completed = counted<[Job]>(2)
    t.worker(async (job) => {
      if (job.id === 'a1') {
        await hold.passed
        removed.listener(await job.removeDeduplicationKey())
      }
    }).on('completed', completed.listener)
    await t.queue.add('test', { foo: 'bar' }, { jobId: 'a1', deduplication: { id: 'dedupId', ttl: 100 } })
    await freed('dedupId')
    await t.queue.add('test', { foo: 'bar' }, { jobId: 'a2', deduplication: { id: 'dedupId', ttl: 60_000 } })
    hold.open()
    expect(await removed.value).toBe(false)
    expect(await t.queue.getDeduplicationJobId('dedupId')).toBe('a2')
    const jobs = (await completed.done).map(([job]) => job)
    expect(jobs.map((job) => job.deduplicationId)).toEqual(['dedupId', 'dedupId'])
  })

  describe('with a ttl', () => {
    it('holds the id for the ttl, then the next add holds it', async () => {
      const dedup = { deduplication: { id: 'a1', ttl: 500 } }
      const job = await t.queue.add('test', { foo: 'bar' }, dedup)
      expect((await t.queue.add('test', { foo: 'bar' }, dedup)).id).toBe(job.id)
      expect((await t.queue.add('test', { foo: 'bar' }, dedup)).id).toBe(job.id)
      await freed('a1')
      const second = await t.queue.add('test', { foo: 'bar' }, dedup)
      expect(second.id).not.toBe(job.id)
      await t.queue.add('test', { foo: 'bar' }, dedup)
      await t.queue.add('test', { foo: 'bar' }, dedup)
      await settled(events, t.queue)
      expect(deduplicated.map((d) => [d.jobId, d.deduplicationId])).toEqual([
        [job.id, 'a1'],
        [job.id, 'a1'],
        [second.id, 'a1'],
        [second.id, 'a1'],
      ])
    })

    it('removing the holder frees the id, with a ttl too', async () => {
      const dedup = { deduplication: { id: 'a1', ttl: 500 } }
      const job = await t.queue.add('test', { foo: 'bar' }, dedup)
      await job.remove()
      const after = await t.queue.add('test', { foo: 'bar' }, dedup)
      expect(after.id).not.toBe(job.id)
      expect(await t.queue.getDeduplicationJobId('a1')).toBe(after.id)
      await freed('a1')
      const second = await t.queue.add('test', { foo: 'bar' }, dedup)
      await second.remove()
      const last = await t.queue.add('test', { foo: 'bar' }, dedup)
      expect(last.id).not.toBe(second.id)
      await t.queue.add('test', { foo: 'bar' }, dedup)
      await settled(events, t.queue)
      // The add after each remove is a new job, and only the add after `last` is deduplicated.
      expect(deduplicated.map((d) => d.jobId)).toEqual([last.id])
    })

    it('extend restarts the ttl on each deduplicated add (a delayed holder)', async () => {
      const done = first<Job>()
      t.worker(() => undefined).on('completed', done.listener)
      const opts = { deduplication: { id: 'a1', ttl: 1000, extend: true }, delay: 1000 }
      const job = await t.queue.add('test', { foo: 'bar' }, opts)
      const added = performance.now()
      // Within the ttl: deduplicated, and the ttl starts again.
      await until(added, 600)
      expect((await t.queue.add('test', { foo: 'baz' }, opts)).id).toBe(job.id)
      // Past the first ttl, within the restarted one: still deduplicated.
      await until(added, 1100)
      expect((await t.queue.add('test', { foo: 'bax' }, opts)).id).toBe(job.id)
      const completed = await done.value
      expect(completed.id).toBe(job.id)
      expect(completed.data).toEqual({ foo: 'bar' })
      expect(await t.queue.getJobCountByTypes()).toBe(1)
      await settled(events, t.queue)
      expect(deduplicated).toHaveLength(2)
    })

    it('extend restarts the ttl on each deduplicated add (a holder that ran)', async () => {
      const done = first<Job>()
      t.worker(() => undefined).on('completed', done.listener)
      const opts = { deduplication: { id: 'a1', ttl: 1000, extend: true } }
      const job = await t.queue.add('test', { foo: 'bar' }, opts)
      const added = performance.now()
      await until(added, 600)
      await t.queue.add('test', { foo: 'baz' }, opts)
      expect(await t.queue.getDeduplicationJobId('a1')).toBe(job.id)
      await until(added, 1100)
      const third = await t.queue.add('test', { foo: 'bax' }, opts)
      expect(await t.queue.getDeduplicationJobId('a1')).toBe(third.id)
      expect(third.id).toBe(job.id)
      const completed = await done.value
      expect(completed.id).toBe(job.id)
      expect(completed.data).toEqual({ foo: 'bar' })
      expect(await t.queue.getJobCountByTypes()).toBe(1)
      await settled(events, t.queue)
      expect(deduplicated).toHaveLength(2)
    })

    it('replace removes a delayed holder; once the ttl passed, the next add is a new holder', async () => {
      const done = first<Job>()
      t.worker(() => undefined).on('completed', done.listener)
      const opts = { deduplication: { id: 'a1', ttl: 500, replace: true }, delay: 500 }
      const job1 = await t.queue.add('test', { foo: 'bar' }, opts)
      const job2 = await t.queue.add('test', { foo: 'baz' }, opts)
      expect(job2.id).not.toBe(job1.id)
      expect(await t.queue.getJob(job1.id as string)).toBeUndefined()
      expect(await t.queue.getDeduplicationJobId('a1')).toBe(job2.id)
      await freed('a1')
      const job3 = await t.queue.add('test', { foo: 'bax' }, { ...opts, delay: 60_000 })
      expect(await t.queue.getDeduplicationJobId('a1')).toBe(job3.id)
      const completed = await done.value
      expect(completed.id).toBe(job2.id)
      expect(completed.data).toEqual({ foo: 'baz' })
      expect(await t.queue.getJobCountByTypes()).toBe(2)
      await settled(events, t.queue)
      expect(deduplicated).toHaveLength(1)
    })

    it('extend with replace: each add replaces the delayed holder, the last one runs', async () => {
      const done = first<Job>()
      t.worker(() => undefined).on('completed', done.listener)
      const jobs: Job[] = []
      for (let i = 0; i < 10; i++) {
        jobs.push(await t.queue.add('test', { foo: i }, { deduplication: { id: 'a1', ttl: 500, extend: true, replace: true }, delay: 500 }))
      }
      const last = jobs[9] as Job
      expect(last.id).toBe('10')
      expect(await t.queue.getDeduplicationJobId('a1')).toBe(last.id)
      const completed = await done.value
      expect(completed.id).toBe('10')
      expect(completed.data.foo).toBe(9)
      expect(await t.queue.getJobCountByTypes()).toBe(1)
      await settled(events, t.queue)
      expect(deduplicated).toHaveLength(9)
    })
  })

  describe('without a ttl', () => {
    it('holds the id until the job is finished', async () => {
      const completed = first<{ jobId: string }>()
      events.once('completed', completed.listener)
      // The first job, while it runs, is added twice more (later jobs, settled()'s marker included, are not).
      t.worker(async (job) => {
        if (job.id !== '1') return
        await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
        await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      })
      await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      expect((await completed.value).jobId).toBe('1')
      const second = await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      // The two deduplicated adds used ids 2 and 3.
      expect(second.id).toBe('4')
      expect(await t.queue.getJobCountByTypes()).toBe(2)
      await settled(events, t.queue)
      expect(deduplicated).toHaveLength(2)
    })

    it('replace removes a delayed holder, not one that started', async () => {
      const hold = gate()
      const started = first<string>()
      const done = first<Job>()
      t.worker(async (job) => {
        started.listener(job.id as string)
        await hold.passed
      }).on('completed', done.listener)
      await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1', replace: true }, delay: 60_000 })
      const job2 = await t.queue.add('test', { foo: 'baz' }, { deduplication: { id: 'a1', replace: true }, delay: 250 })
      expect(await t.queue.getDeduplicationJobId('a1')).toBe(job2.id)
      expect(await started.value).toBe(job2.id)
      const job3 = await t.queue.add('test', { foo: 'bax' }, { deduplication: { id: 'a1', replace: true }, delay: 500 })
      expect(job3.id).toBe(job2.id)
      expect(await t.queue.getDeduplicationJobId('a1')).toBe(job2.id)
      hold.open()
      const completed = await done.value
      expect(completed.id).toBe('2')
      expect(completed.data).toEqual({ foo: 'baz' })
      expect(await t.queue.getJobCountByTypes()).toBe(1)
      await settled(events, t.queue)
      expect(deduplicated).toHaveLength(1)
    })

    // Not among BullMQ's cases (its tests predate the option): written here, run on both libraries.
    it('reschedule keeps a delayed holder and its data, due the new delay from now; not one that started', async () => {
      const opts = { deduplication: { id: 'r1', reschedule: true } }
      const job1 = await t.queue.add('test', { foo: 'bar' }, { ...opts, delay: 60_000 })
      const job2 = await t.queue.add('test', { foo: 'baz' }, { ...opts, delay: 100 })
      expect(job2.id).toBe(job1.id)
      expect((await t.queue.getJob(job1.id as string))?.delay).toBe(100)
      const completed: Job[] = []
      t.worker(() => undefined).on('completed', (job: Job) => completed.push(job))
      await waitFor(() => completed.length === 1, { what: 'the rescheduled holder to run' })
      expect(completed[0]?.id).toBe(job1.id)
      expect(completed[0]?.data).toEqual({ foo: 'bar' })
      // A holder added with a minute's delay, rescheduled by an add without one: due now, it runs.
      const job3 = await t.queue.add('test', { foo: 'bax' }, { ...opts, delay: 60_000 })
      expect(job3.id).not.toBe(job1.id)
      const job4 = await t.queue.add('test', { foo: 'qux' }, { ...opts })
      expect(job4.id).toBe(job3.id)
      await waitFor(() => completed.length === 2, { what: 'the second holder to run' })
      expect(completed[1]?.id).toBe(job3.id)
      expect(completed[1]?.data).toEqual({ foo: 'bax' })
      await settled(events, t.queue)
      expect(deduplicated).toHaveLength(2)
    })

    it('removing the holder frees the id', async () => {
      const job = await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      await job.remove()
      const next = await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      expect(next.id).not.toBe(job.id)
      await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      const second = await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      expect(second.id).toBe(next.id)
      await second.remove()
      expect(await t.queue.getDeduplicationJobId('a1')).toBeNull()
      await settled(events, t.queue)
      expect(deduplicated.map((d) => d.jobId)).toEqual([next.id, next.id])
    })

    it('removing a finished job that no longer holds the id leaves the id held', async () => {
      const done = first<Job>()
      const worker = t.worker(() => undefined)
      worker.on('completed', done.listener)
      const job = await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      await done.value
      await worker.close()
      const holder = await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })
      await job.remove()
      expect((await t.queue.add('test', { foo: 'bar' }, { deduplication: { id: 'a1' } })).id).toBe(holder.id)
      await settled(events, t.queue)
      expect(deduplicated.map((d) => d.jobId)).toEqual([holder.id])
    })
  })

  describe('the option checked, and the other calls', () => {
    it('refuses an empty deduplication id, and adds nothing', async () => {
      await differs.refused(name, t.queue.add('test', { foo: 'bar' }, { deduplication: { id: '' } }), 'Deduplication id must be provided', {
        code: 'ERR_OPTIONS',
        mentions: 'deduplication',
      })
      expect(await t.queue.getJobCountByTypes()).toBe(0)
    })

    it('refuses the removed debounce option, naming deduplication', async () => {
      const opts = { debounce: { id: 'legacy' } } as unknown as JobsOptions
      await differs.refused(
        name,
        t.queue.add('test', { foo: 'bar' }, opts),
        'Debounce option has been removed. Use deduplication option instead',
        {
          code: 'ERR_OPTIONS',
          mentions: 'deduplication',
        },
      )
      expect(await t.queue.getJobCountByTypes()).toBe(0)
    })

    it('addBulk deduplicates within one call and against held ids', async () => {
      const held = await t.queue.add('test', { n: 0 }, { deduplication: { id: 'held' } })
      const jobs = await t.queue.addBulk([
        { name: 'test', data: { n: 1 }, opts: { deduplication: { id: 'x' } } },
        { name: 'test', data: { n: 2 }, opts: { deduplication: { id: 'x' } } },
        { name: 'test', data: { n: 3 }, opts: { deduplication: { id: 'held' } } },
        { name: 'test', data: { n: 4 } },
      ])
      expect(jobs[1]?.id).toBe(jobs[0]?.id)
      expect(jobs[2]?.id).toBe(held.id)
      expect(new Set(jobs.map((j) => j.id)).size).toBe(3)
      expect(await t.queue.getDeduplicationJobId('x')).toBe(jobs[0]?.id)
      expect(await t.queue.getJobCountByTypes()).toBe(3)
      await settled(events, t.queue)
      // One event per deduplicated job; their order within one addBulk is not BullMQ's promise (EchoMQ emits
      // the one against the held id first).
      expect(deduplicated.map((d) => `${d.jobId}/${d.deduplicationId}`).sort()).toEqual([`${held.id}/held`, `${jobs[0]?.id}/x`].sort())
    })

    it("BullMQ's deprecated getDebounceJobId and removeDebounceKey are the deduplication calls", async () => {
      const job = await t.queue.add('test', {}, { deduplication: { id: 'd' } })
      expect(await t.queue.getDebounceJobId('d')).toBe(job.id)
      expect(await t.queue.removeDebounceKey('d')).toBe(1)
      expect(await t.queue.getDeduplicationJobId('d')).toBeNull()
      expect(await t.queue.removeDeduplicationKey('d')).toBe(0)
    })
  })
})
