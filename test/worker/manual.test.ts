/**
 * Jobs taken by hand (worker/manual.ts, lib/job-finishes.ts), beyond the ported BullMQ cases
 * (test/port/manual.test.ts): a blocking take woken by an add, bad input refused with nothing changed, a
 * closed or paused worker, a flow child finished by hand, a lease nothing renews, and a result that is not JSON.
 */
import { expect, it } from 'vitest'
import { FlowProducer, sweep } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 400 } })
const manual = (options = {}) => fx.worker(null as never, options)

it('a blocking getNextJob is woken by an add', async () => {
  const worker = manual()
  await worker.waitUntilReady()
  const next = worker.getNextJob('t')
  await fx.queue.add('late', { n: 1 })
  const job = await next
  expect(job?.name).toBe('late')
  expect(await redis.client.get(fx.keys.lock(job?.id as string))).toBe(`t:1`)
  expect(job?.token).toBe('t')
})

it('getNextJob refuses a bad token or option, with nothing changed in Redis', async () => {
  const worker = manual()
  await fx.queue.add('x', {})
  await worker.waitUntilReady()
  const before = await snapshot(redis.client)
  for (const [token, options] of [
    ['', {}],
    ['a b', {}],
    [42, {}],
    ['t', { block: 'yes' }],
    ['t', { blok: true }],
  ] as const) {
    await expect(worker.getNextJob(token as never, options as never)).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  }
  expect(await snapshot(redis.client)).toEqual(before)
})

it('a paused worker takes nothing by hand; a closed one refuses with ERR_CLOSED', async () => {
  const worker = manual()
  await fx.queue.add('x', {})
  await worker.pause()
  expect(await worker.getNextJob('t', { block: false })).toBeUndefined()
  worker.resume()
  await worker.close()
  await expect(worker.getNextJob('t')).rejects.toMatchObject({ code: 'ERR_CLOSED' })
  expect(await fx.queue.getJobCounts('wait')).toEqual({ wait: 1 })
})

it("a flow's child completed by hand lets its parent run", async () => {
  const producer = new FlowProducer({ connection: redis.client })
  try {
    const flow = await producer.add({ name: 'parent', queueName: 'q', data: {}, children: [{ name: 'child', queueName: 'q', data: {} }] })
    const worker = manual()
    const child = await worker.getNextJob('t', { block: false })
    expect(child?.id).toBe(flow.children?.[0]?.job.id)
    await child?.moveToCompleted({ done: true }, 't', false)
    const parent = await worker.getNextJob('t', { block: false })
    expect(parent?.id).toBe(flow.job.id)
    expect(await parent?.getChildrenValues()).toEqual({ [`emq:{q}:${child?.id}`]: { done: true } })
  } finally {
    await producer.close()
  }
})

it('nothing renews a lease taken by hand: once it lapses, a sweep recovers the job and the finish is refused', async () => {
  const worker = manual()
  await fx.queue.add('x', {}, { attempts: 2 })
  const job = await worker.getNextJob('t', { block: false })
  // Two sweeps past the lease (the first marks, the second recovers): the job is back in wait.
  await waitFor(async () => {
    await sweep(redis.client, 'q', { graceMs: 1 })
    return (await fx.queue.getJobCounts('wait')).wait === 1
  })
  await expect(job?.moveToCompleted('late', 't')).rejects.toMatchObject({ code: 'ERR_JOB_STATE' })
  expect(await job?.getState()).toBe('waiting')
})

it('a result that is not JSON is refused before anything is written', async () => {
  const worker = manual()
  await fx.queue.add('x', {})
  const job = await worker.getNextJob('t', { block: false })
  const before = await snapshot(redis.client)
  await expect(job?.moveToCompleted(10n as never, 't')).rejects.toMatchObject({ code: 'ERR_JOB_DATA' })
  expect(await snapshot(redis.client)).toEqual(before)
  expect(await job?.getState()).toBe('active')
})

it('getNextJob calls waiting together share one wait, and each takes a job once jobs come', async () => {
  const worker = manual()
  await worker.waitUntilReady()
  const waiting = [worker.getNextJob('a'), worker.getNextJob('b'), worker.getNextJob('c')]
  await fx.queue.addBulk([1, 2, 3].map((n) => ({ name: 'late', data: { n } })))
  const jobs = await Promise.all(waiting)
  expect(jobs.map((j) => j?.data.n).sort()).toEqual([1, 2, 3])
})

it("a worker with a processor does not block in getNextJob (its take loop waits on the queue's marker)", async () => {
  const worker = fx.worker(() => 'ok', { drainDelay: 600 })
  await worker.waitUntilReady()
  expect(await worker.getNextJob('t')).toBeUndefined()
})

it("a finish by hand applies the worker's retention, and moveToWait answers the rate limit's hold", async () => {
  const worker = manual({ removeOnComplete: true })
  await fx.queue.addBulk([
    { name: 'x', data: {}, opts: { jobId: 'kept-not' } },
    { name: 'x', data: {}, opts: { jobId: 'back' } },
  ])
  const first = await worker.getNextJob('t', { block: false })
  await first?.moveToCompleted('done', 't', false)
  expect(await fx.queue.getJob('kept-not')).toBeUndefined()
  const second = await worker.getNextJob('t', { block: false })
  await fx.queue.rateLimit(60_000)
  expect(await second?.moveToWait('t')).toBeGreaterThan(50_000)
  expect(await fx.queue.getJobState('back')).toBe('waiting')
})

it('a job scheduler\u2019s run taken by hand makes its next run, as one a processor runs', async () => {
  const worker = manual()
  const first = await fx.queue.upsertJobScheduler('hand', { every: 60_000 }, { name: 'beat' })
  const job = await worker.getNextJob('t', { block: false })
  expect(job?.id).toBe(first?.id)
  const due = Number(first?.id.split(':')[2]) + 60_000
  // Made before getNextJob resolved, as BullMQ's.
  expect((await fx.queue.getJob(`repeat:hand:${due}`))?.state).toBe('delayed')
  expect(await job?.moveToCompleted('ok', 't', false)).toEqual([])
  expect(await fx.queue.getJobCounts('delayed', 'completed')).toEqual({ delayed: 1, completed: 1 })
})
