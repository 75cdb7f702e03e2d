/**
 * Deduplication's `keepLastIfActive`, EchoMQ's side (test/port/deduplication-keep-last.test.ts runs BullMQ's cases
 * on both libraries): where the next job waits (meta's `dn:<id>`, no job hash until it is added), the holder's
 * finish sent again with the next job's key, a next job kept across the holder's retries, one dropped when
 * its holder stalls out of its attempts (as a removal drops it), a holder added without the option, and a bad
 * value refused with nothing written.
 */
import { expect, it } from 'vitest'
import { type EchoMQError, type Job, QueueEvents, sweep } from '../../lib/index.js'
import { finishRuns } from '../../lib/redis/commands.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'
import { useWorkerProcesses } from '../helpers/worker-process.js'

const redis = useRedis()
const fx = useQueue(redis, { close: (w) => w.close(true), workers: { lockDuration: 400, closeTimeout: 500 } })
const spawnWorker = useWorkerProcesses()
const { keys } = fx
const keepLast = { deduplication: { id: 'k', keepLastIfActive: true } }

/** A worker whose first job waits until `release()`; resolves once that job runs. */
async function holdingWorker(fail = false) {
  let release: () => void = () => undefined
  const held = new Promise<void>((resolve) => {
    release = resolve
  })
  let first = true
  const w = fx.worker(
    async (job: Job) => {
      if (first) {
        first = false
        await held
        if (fail) throw new Error('no')
      }
      return job.data
    },
    { skipStalledCheck: true },
  )
  await nextEvent(w, 'active')
  return { w, release }
}

it('the next job waits in meta, not as a job; the holder ends and it is added, holding the id', async () => {
  const a = await fx.queue.add('j', { v: 1 }, keepLast)
  const { w, release } = await holdingWorker()
  const dbsize = await redis.client.dbsize()
  expect((await fx.queue.add('j', { v: 2 }, keepLast)).id).toBe(a.id)
  expect((await fx.queue.add('j', { v: 3 }, { ...keepLast, jobId: 'n3' })).id).toBe(a.id)
  // No key made: the latest add waits as meta's field, the one before replaced.
  expect(await redis.client.dbsize()).toBe(dbsize)
  expect(await redis.client.hget(keys.meta, 'dn:k')).toContain('{"v":3}')
  expect(await fx.queue.getJob('n3')).toBeUndefined()

  const done: string[] = []
  w.on('completed', (job) => done.push(job.id as string))
  release()
  await waitFor(() => done.length === 2, { what: 'the holder and its next job to complete' })
  expect(done).toEqual([a.id, 'n3'])
  expect(await redis.client.hget(keys.meta, 'dn:k')).toBeNull()
  // The next job held the id until it completed, and released it then.
  expect(await redis.client.hget(keys.job('n3'), 'deid')).toBe('k')
  expect(await redis.client.hget(keys.meta, 'nexts')).toBe('1')
  expect(await fx.queue.getDeduplicationJobId('k')).toBeNull()
})

it('a holder that fails with attempts left keeps its next job until its last attempt', async () => {
  await fx.queue.add('j', { v: 1 }, { ...keepLast, attempts: 2, backoff: { type: 'fixed', delay: 200 } })
  const { w, release } = await holdingWorker(true)
  const b = await fx.queue.add('j', { v: 2 }, { ...keepLast, jobId: 'next' })
  expect(b.id).not.toBe('next')
  const retried = nextEvent(w, 'failed')
  release()
  await retried
  // The retry waits its backoff: the next job is still stored, not added.
  expect(await redis.client.hget(keys.meta, 'dn:k')).not.toBeNull()
  expect(await fx.queue.getJob('next')).toBeUndefined()
  const [next] = await nextEvent<[Job]>(w, 'completed')
  expect(next.id).toBe(b.id)
  await waitFor(async () => (await fx.queue.getJob('next'))?.state === 'completed', { what: 'the next job to run' })
})

it('a holder added without the option still adds the next job a keepLastIfActive add stored', async () => {
  const a = await fx.queue.add('j', { v: 1 }, { deduplication: { id: 'k' } })
  const { w, release } = await holdingWorker()
  expect((await fx.queue.add('j', { v: 2 }, { ...keepLast, jobId: 'after' })).id).toBe(a.id)
  const done: string[] = []
  w.on('completed', (job) => done.push(job.id as string))
  release()
  await waitFor(() => done.length === 2, { what: 'both jobs to complete' })
  expect(done).toEqual([a.id, 'after'])
})

it('a holder that stalls out of its attempts drops its next job with its hold, as a removal does', async () => {
  const zero = fx.worker(() => 'ok', { maxStalledCount: 0, skipStalledCheck: true })
  await waitFor(async () => (await redis.client.hget(keys.meta, 'maxStalledCount')) === '0', { what: 'maxStalledCount 0 in meta' })
  await zero.close()
  await fx.queue.add('j', { v: 1 }, { ...keepLast, jobId: 'h1' })
  const proc = await spawnWorker({ REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '300', HEARTBEAT_MS: '100', SKIP_STALLED_CHECK: '1' })
  await waitFor(() => proc.active().includes('h1'), { what: 'a worker process to take h1' })
  expect((await fx.queue.add('j', { v: 2 }, { ...keepLast, jobId: 'n1' })).id).toBe('h1')
  expect(await redis.client.hexists(keys.meta, 'dn:k')).toBe(1)
  await proc.stop()
  await waitFor(async () => (await redis.client.exists(keys.lock('h1'))) === 0, { what: 'the lease of h1 to lapse' })
  await sweep(redis.url, 'q', { graceMs: 0 })
  expect((await sweep(redis.url, 'q', { graceMs: 0 })).failed).toEqual(['h1'])
  expect(await redis.client.hexists(keys.meta, 'dn:k')).toBe(0)
  expect(await fx.queue.getDeduplicationJobId('k')).toBeNull()
  expect(await fx.queue.getJob('n1')).toBeUndefined()
})

it('a keepLastIfActive that is not a boolean is refused, nothing written', async () => {
  const before = await redis.client.dbsize()
  const err = (await fx.queue
    .add('j', {}, { deduplication: { id: 'k', keepLastIfActive: 'yes' } } as never)
    .catch((e: unknown) => e)) as EchoMQError
  expect(err.code).toBe('ERR_OPTIONS')
  expect(err.message).toContain('keepLastIfActive')
  expect(await redis.client.dbsize()).toBe(before)
})

it('the next job a finish named keeps its id while adds replace what it holds: the finish sent again finds it', async () => {
  const a = await fx.queue.add('j', { v: 1 }, keepLast)
  const manual = fx.worker(null as never)
  const holder = await manual.getNextJob('t')
  expect(holder?.id).toBe(a.id)
  await fx.queue.add('j', { v: 2 }, { ...keepLast, jobId: 'n2' })
  const run = { run: { id: a.id as string, token: 't:1' }, action: 'complete' as const, value: 'null' }
  // The first send names the next job and claims it ("*")...
  const first = await finishRuns(redis.client, keys, [run])
  expect(first.runs[0]).toMatchObject({ status: 'next', next: 'n2' })
  expect(await redis.client.hget(keys.meta, 'dn:k')).toMatch(/^\*/)
  // ...an add before the second send replaces what it holds, not its id...
  expect((await fx.queue.add('j', { v: 3 }, { ...keepLast, jobId: 'n3' })).id).toBe(a.id)
  // ...so the second send, with n2's key, completes the holder and adds the latest add's job as n2.
  const second = await finishRuns(redis.client, keys, [{ ...run, next: 'n2' }])
  expect(second.runs[0]).toMatchObject({ status: 'ok', state: 'completed' })
  expect(await fx.queue.getJob('n2')).toMatchObject({ data: { v: 3 }, state: 'wait' })
  expect(await fx.queue.getJob('n3')).toBeUndefined()
  expect(await fx.queue.getDeduplicationJobId('k')).toBe('n2')
})

it('a failure with attempts left does not ask for the next job', async () => {
  await fx.queue.add('j', { v: 1 }, { ...keepLast, attempts: 2, backoff: { type: 'fixed', delay: 60_000 } })
  const { w, release } = await holdingWorker(true)
  await fx.queue.add('j', { v: 2 }, keepLast)
  const failed = nextEvent(w, 'failed')
  release()
  await failed
  // No finish named it: not claimed, the id it will take is still the latest add's.
  expect(await redis.client.hget(keys.meta, 'dn:k')).toMatch(/^\d/)
})

it('with replace, a running holder keeps the add as its next job (BullMQ: replace only removes a delayed holder)', async () => {
  const both = { deduplication: { id: 'r', keepLastIfActive: true, replace: true } }
  const b = await fx.queue.add('j', { v: 1 }, both)
  const { w, release } = await holdingWorker()
  expect((await fx.queue.add('j', { v: 2 }, { ...both, jobId: 'r2' })).id).toBe(b.id)
  const done: string[] = []
  w.on('completed', (job) => done.push(job.id as string))
  release()
  await waitFor(() => done.length === 2, { what: 'the holder and its next job' })
  expect(done).toEqual([b.id, 'r2'])
})

it('a next job whose custom id was taken meanwhile is not added: duplicated is emitted, and the id is free', async () => {
  const events = new QueueEvents('q', { connection: redis.url, blockingTimeout: 200 })
  await events.waitUntilReady()
  try {
    const a = await fx.queue.add('j', { v: 1 }, keepLast)
    const { w, release } = await holdingWorker()
    expect((await fx.queue.add('j', { v: 2 }, { ...keepLast, jobId: 'y' })).id).toBe(a.id)
    await fx.queue.add('other', { v: 'plain' }, { jobId: 'y', delay: 60_000 })
    const duplicated = nextEvent<[{ jobId: string }]>(events, 'duplicated')
    const completed = nextEvent(w, 'completed')
    release()
    await completed
    expect((await duplicated)[0].jobId).toBe('y')
    expect(await fx.queue.getJob('y')).toMatchObject({ name: 'other', data: { v: 'plain' } })
    expect(await fx.queue.getDeduplicationJobId('k')).toBeNull()
  } finally {
    await events.close()
  }
})
