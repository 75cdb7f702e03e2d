/**
 * The queue's own limits (BullMQ's setGlobalConcurrency and setGlobalRateLimit): every worker, whatever its
 * own concurrency or limiter, starts jobs within them, as Redis counts them at each take.
 */
import { expect, it } from 'vitest'
import { Worker } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 2_000, skipStalledCheck: true } })

/** A processor that records how many runs overlap, across every worker given it. */
function overlapProbe(release: () => Promise<unknown>) {
  const probe = { running: 0, most: 0, order: [] as string[] }
  const run = async (job: { id?: string }) => {
    probe.running++
    probe.most = Math.max(probe.most, probe.running)
    probe.order.push(job.id as string)
    await release()
    probe.running--
  }
  return { probe, run }
}

it('setGlobalConcurrency(1): one job at a time across two workers of concurrency 10, in the order added', async () => {
  expect(await fx.queue.getGlobalConcurrency()).toBeNull()
  await fx.queue.addBulk(Array.from({ length: 12 }, (_, i) => ({ name: 'job', data: {}, opts: { jobId: `j${i}` } })))
  expect(await fx.queue.setGlobalConcurrency(1)).toBe(1)
  let maxedSeen = false
  const { probe, run } = overlapProbe(async () => {
    maxedSeen ||= await fx.queue.isMaxed()
    await new Promise((resolve) => setTimeout(resolve, 20))
  })
  fx.worker(run, { concurrency: 10 })
  fx.worker(run, { concurrency: 10 })
  await waitFor(async () => (await fx.queue.getCompletedCount()) === 12, { what: 'every job completed', timeoutMs: 15_000 })

  expect(probe.most).toBe(1)
  expect(probe.order).toEqual(Array.from({ length: 12 }, (_, i) => `j${i}`))
  expect(maxedSeen).toBe(true)
  expect(await fx.queue.isMaxed()).toBe(false)
  expect(await fx.queue.getGlobalConcurrency()).toBe(1)
})

it('a global concurrency of 3 is reached and never passed; with it removed, the workers run up to their own', async () => {
  let open!: () => void
  let gate = new Promise<void>((resolve) => (open = resolve))
  const { probe, run } = overlapProbe(() => gate)
  await fx.queue.setGlobalConcurrency(3)
  for (let i = 0; i < 3; i++) fx.worker(run, { concurrency: 4 })
  await fx.queue.addBulk(Array.from({ length: 20 }, () => ({ name: 'job', data: {} })))
  await waitFor(() => probe.running === 3, { what: 'three jobs running' })
  // Held there: the other workers find the queue maxed, and nothing of theirs starts.
  expect(await fx.queue.isMaxed()).toBe(true)
  expect(await fx.queue.getJobCounts('active', 'waiting')).toEqual({ active: 3, waiting: 17 })
  // No job is reserved in a worker's hand either: a job in hand would start before Redis counts it.
  expect(await redis.client.zcard(fx.keys.reserved)).toBe(0)

  expect(await fx.queue.removeGlobalConcurrency()).toBe(1)
  open()
  gate = new Promise<void>((resolve) => (open = resolve))
  await waitFor(() => probe.running > 3, { what: 'more than three running once removed', timeoutMs: 5_000 })
  open()
  await waitFor(async () => (await fx.queue.getCompletedCount()) === 20, { what: 'every job completed' })
  expect(await fx.queue.getGlobalConcurrency()).toBeNull()
})

it('a worker of its own finds a slot freed by another worker (a failure with backoff) without a job of its own ending', async () => {
  await fx.queue.setGlobalConcurrency(1)
  const ran: string[] = []
  fx.worker(async (job) => {
    ran.push(job.id as string)
    if (job.id === 'first' && job.attemptsMade === 0) throw new Error('again later')
  })
  await fx.queue.add('job', {}, { jobId: 'first', attempts: 2, backoff: { type: 'fixed', delay: 200 } })
  await fx.queue.add('job', {}, { jobId: 'second' })
  fx.worker(async (job) => {
    ran.push(job.id as string)
  })
  await waitFor(async () => (await fx.queue.getCompletedCount()) === 2, { what: 'both jobs completed', timeoutMs: 10_000 })
  expect(ran.filter((id) => id === 'first')).toHaveLength(2)
  expect(ran).toContain('second')
})

it('setGlobalRateLimit paces starts across workers over their own limiters; getRateLimitTtl reads its max', async () => {
  expect(await fx.queue.getGlobalRateLimit()).toBeNull()
  expect(await fx.queue.setGlobalRateLimit(2, 400)).toBe(2)
  expect(await fx.queue.getGlobalRateLimit()).toEqual({ max: 2, duration: 400 })
  const starts: number[] = []
  const record = () => {
    starts.push(performance.now())
  }
  fx.worker(record, { concurrency: 5, limiter: { max: 100, duration: 10 } })
  fx.worker(record, { concurrency: 5 })
  await fx.queue.addBulk(Array.from({ length: 6 }, () => ({ name: 'job', data: {} })))
  await waitFor(() => starts.length >= 2, { what: 'the first window started' })
  // With the window full, the ttl counts against the global max (BullMQ's, when no maxJobs is given).
  expect(await fx.queue.getRateLimitTtl()).toBeGreaterThan(0)
  await waitFor(async () => (await fx.queue.getCompletedCount()) === 6, { what: 'every job completed', timeoutMs: 10_000 })
  starts.sort((a, b) => a - b)
  // Every window of 400 ms holds at most two starts (the sliding window, exact across workers).
  for (let i = 2; i < starts.length; i++) expect((starts[i] as number) - (starts[i - 2] as number)).toBeGreaterThanOrEqual(390)

  expect(await fx.queue.removeGlobalRateLimit()).toBe(2)
  expect(await fx.queue.getGlobalRateLimit()).toBeNull()
  expect(await redis.client.hmget(fx.keys.meta, 'max', 'duration')).toEqual([null, null])
})

it('getNextJob takes nothing while the queue is maxed, and the job waits', async () => {
  await fx.queue.setGlobalConcurrency(1)
  await fx.queue.addBulk([
    { name: 'a', data: {} },
    { name: 'b', data: {} },
  ])
  // direct: a worker with no processor, for manual processing
  const manual = new Worker(fx.queue.name, null, { connection: redis.url, drainDelay: 1 })
  try {
    const first = await manual.getNextJob('tok', { block: false })
    expect(first?.name).toBe('a')
    expect(await manual.getNextJob('tok', { block: false })).toBeUndefined()
    expect(await fx.queue.getJobCounts('active', 'waiting')).toEqual({ active: 1, waiting: 1 })
    await first?.moveToCompleted('done', 'tok', false)
    expect((await manual.getNextJob('tok', { block: false }))?.name).toBe('b')
  } finally {
    await manual.close()
  }
})

it('bad limits are refused with ERR_OPTIONS and nothing is written', async () => {
  const bad: [string, () => Promise<unknown>][] = [
    ['concurrency 0', () => fx.queue.setGlobalConcurrency(0)],
    ['concurrency 1.5', () => fx.queue.setGlobalConcurrency(1.5)],
    ['concurrency as text', () => fx.queue.setGlobalConcurrency('2' as unknown as number)],
    ['max 0', () => fx.queue.setGlobalRateLimit(0, 1_000)],
    ['duration -1', () => fx.queue.setGlobalRateLimit(1, -1)],
    ['duration NaN', () => fx.queue.setGlobalRateLimit(1, Number.NaN)],
  ]
  for (const [what, call] of bad) await expect(call(), what).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
  expect(await redis.client.hmget(fx.keys.meta, 'concurrency', 'max', 'duration')).toEqual([null, null, null])
})

it('jobs a busy worker reserved before setGlobalConcurrency start within it: none from a hand', async () => {
  const gates: (() => void)[] = []
  let running = 0
  const startedWith: number[] = []
  fx.worker(
    async () => {
      running++
      startedWith.push(running)
      // The first ends at once (its finish reserves the next jobs ahead); the next two wait to be let go.
      if (startedWith.length === 2 || startedWith.length === 3) await new Promise<void>((resolve) => gates.push(resolve))
      running--
    },
    { concurrency: 2 },
  )
  await fx.queue.addBulk(Array.from({ length: 12 }, () => ({ name: 'job', data: {} })))
  await waitFor(() => gates.length === 2, { what: 'two jobs held running' })
  await waitFor(async () => (await redis.client.zcard(fx.keys.reserved)) > 0, { what: 'jobs reserved ahead' })
  await fx.queue.setGlobalConcurrency(1)
  // One of the two ends: the other still runs, so the queue is at its limit and nothing more starts.
  gates[0]?.()
  await waitFor(async () => (await fx.queue.getCompletedCount()) === 2, { what: 'the second job completed' })
  await waitFor(async () => fx.queue.isMaxed(), { what: 'the queue maxed' })
  expect(startedWith).toHaveLength(3)
  gates[1]?.()
  await waitFor(async () => (await fx.queue.getCompletedCount()) === 12, { what: 'every job completed' })
  // After the two that ran when it was set, each job started alone, the reserved ones too.
  expect(startedWith.slice(3)).toEqual(Array.from({ length: 9 }, () => 1))
})
