/**
 * BullMQ's tests of creating a job (tests/job.test.ts: `.create` with its ids and refused options, and
 * `JSON.stringify`), ported: the cases deduplication.test.ts and flow-failures.test.ts do not cover. They run on
 * LIBRARIES (adapter.ts). BullMQ's `Job.create(queue, ...)` is `queue.add` here (the same write; Job.create
 * itself: job.test.ts). A refused option's error is BullMQ's message, or EchoMQ's code (`differs.refused`).
 */
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { differs, first, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

describe.each(LIBRARIES)('%s: creating a job', (name) => {
  const t = usePort(redis, name)
  const data = { foo: 'bar' }

  it('saves the job, with its data and options', async () => {
    // differs.takesTimestamp: EchoMQ refuses `timestamp` (docs/migrating-from-bullmq-queue.md).
    const opts = differs.takesTimestamp(name) ? { timestamp: 1234567890 } : { attempts: 2 }
    const job = await t.queue.add('test', data, opts)
    const stored = await t.lib.Job.fromId(t.queue, job.id as string)
    expect(stored?.id).toBe(job.id)
    expect(stored?.data.foo).toBe('bar')
    expect(stored?.opts).toMatchObject(opts)
  })

  it('refuses `timestamp` where EchoMQ takes its own clock', async () => {
    const added = t.queue.add('test', data, { timestamp: 1234567890 })
    if (differs.takesTimestamp(name)) expect((await added).timestamp).toBe(1234567890)
    else await differs.refused(name, added, '', { code: 'ERR_OPTIONS', mentions: 'timestamp' })
  })

  it('takes a custom jobId', async () => {
    expect((await t.queue.add('test', data, { jobId: 'customjob' })).id).toBe('customjob')
  })

  it('an empty custom jobId is left out: the next numeric id', async () => {
    await t.queue.add('test', data)
    const added = t.queue.add('test', data, { jobId: '' })
    if (differs.emptyJobIdIgnored(name)) expect((await added).id).toBe('2')
    else await differs.refused(name, added, '', { code: 'ERR_JOB_ID', mentions: 'job id' })
  })

  it.each([
    ['an ascii', { foo: 'bar' }, 12, undefined],
    ['a non-ascii', { foo: 'βÅ®' }, 15, undefined],
    ['an ascii, with a custom id,', { foo: 'bar' }, 12, 'customJobId'],
  ])('refuses %s job over its sizeLimit, and adds nothing', async (_, payload, sizeLimit, jobId) => {
    const added = t.queue.add('test', payload, { sizeLimit, ...(jobId ? { jobId } : {}) })
    // differs.takesSizeLimit: EchoMQ refuses the option itself; maxDataBytes on the Queue bounds data.
    const echomq = { code: 'ERR_OPTIONS', mentions: 'sizeLimit' }
    await differs.refused(name, added, `The size of job test exceeds the limit ${sizeLimit} bytes`, echomq)
    expect(await t.queue.getJobCountByTypes()).toBe(0)
  })

  it('takes a job within its sizeLimit', async () => {
    const added = t.queue.add('test', data, { sizeLimit: 20 })
    if (differs.takesSizeLimit(name)) expect((await added).opts.sizeLimit).toBe(20)
    else await differs.refused(name, added, '', { code: 'ERR_OPTIONS', mentions: 'sizeLimit' })
  })

  it('refuses a parent that does not exist, and adds nothing', async () => {
    const parentKey = `${t.queue.qualifiedName}:missing-parent`
    const added = t.queue.add('test', data, { parent: { id: 'missing-parent', queue: t.queue.qualifiedName } })
    await differs.refused(name, added, `Missing key for parent job ${parentKey}. addJob`, {
      code: 'ERR_JOB_MISSING',
      mentions: parentKey,
    })
    expect(await t.queue.getJobCountByTypes()).toBe(0)
  })

  it.each([
    ['a float priority', { priority: 1.1 }, 'Priority should not be float', 'priority'],
    ['a priority over 2097151', { priority: 2097152 }, 'Priority should be between 0 and 2097151', 'priority'],
    ['a backoff jitter under 0', { backoff: { type: 'fixed', jitter: -1 } }, 'Jitter should be between 0 and 1', 'jitter'],
    ['a backoff jitter over 1', { backoff: { type: 'fixed', jitter: 5 } }, 'Jitter should be between 0 and 1', 'jitter'],
  ])('refuses %s, and adds nothing', async (_, opts, message, mentions) => {
    await differs.refused(name, t.queue.add('test', data, opts), message, { code: 'ERR_OPTIONS', mentions })
    expect(await t.queue.getJobCountByTypes()).toBe(0)
  })

  it('refuses deduplication with a parent, and adds nothing more', async () => {
    const parent = await t.queue.add('parent', {})
    const added = t.queue.add('test', data, {
      deduplication: { id: 'dedup-id' },
      parent: { id: parent.id as string, queue: t.queue.qualifiedName },
    })
    await differs.refused(name, added, 'Deduplication and parent options cannot be used together', {
      code: 'ERR_OPTIONS',
      mentions: 'Deduplication and parent',
    })
    expect(await t.queue.getJobCountByTypes()).toBe(1)
  })

  describe('JSON.stringify', () => {
    it('keeps the types of the fields, and leaves the queue out', async () => {
      const job = await t.queue.add('test', data)
      job.progress = 20
      const parsed = JSON.parse(JSON.stringify(job))
      expect(parsed).toHaveProperty('data', data)
      expect(parsed).toHaveProperty('name', 'test')
      expect(parsed).toHaveProperty('progress', 20)
      expect(parsed).toHaveProperty('queueQualifiedName', t.queue.qualifiedName)
      expect(parsed).not.toHaveProperty('queue')
    })

    it('keeps returnvalue, a field of the job', async () => {
      const job = await t.queue.add('test', data)
      job.returnvalue = 1
      expect(JSON.parse(JSON.stringify(job))).toHaveProperty('returnvalue', 1)
    })

    it('keeps 0 as data, which the processor reads back', async () => {
      const job = await t.queue.add('test', 0)
      expect(JSON.parse(JSON.stringify(job))).toHaveProperty('data', 0)
      const seen = first<unknown>()
      t.worker((run) => seen.listener(run.data))
      expect(await seen.value).toBe(0)
    })
  })
})
