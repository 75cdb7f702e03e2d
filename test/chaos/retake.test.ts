/**
 * The chaos run's rarest interleaving, made deterministic: a worker stalls past its lease (a GC pause, a
 * blocked event loop, SIGSTOP), two sweeps recover its job, and the same worker takes the job again while
 * the old run is still in its processor. The old run is fenced out for good (its token can never own the
 * job again); the new run owns the job and must be left alone.
 *
 * The test's own sweeps stand for the reaper's, so the worker runs none (skipStalledCheck): a worker's
 * first stalled check runs as it starts, beside its first take, and when it lands after the lease is
 * deleted it marks the job itself; the test's first sweep (grace 0) then recovers it at once and the
 * second finds nothing to do.
 */
import { expect, it } from 'vitest'
import { type Job, sweep } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { closeWithin } from './cleanup.js'

const redis = useRedis()
const fx = useQueue(redis, { close: (w) => closeWithin(w), onError: () => undefined })

interface Run {
  n: number
  signal: AbortSignal
  release(): void
}

it('a job recovered from a stalled worker and taken again by that same worker: the old run is told, the new run keeps the job', async () => {
  const clock = new ManualClock() // heartbeats only when the test advances it
  const runs: Run[] = []
  const w = fx.worker(
    (job: Job, _token: string, signal: AbortSignal) =>
      new Promise((resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true })
        runs.push({ n: job.attemptsStarted, signal, release: () => resolve(`run${job.attemptsStarted}`) })
      }),
    { concurrency: 2, lockDuration: 5_000, heartbeatInterval: 1_000, closeTimeout: 200, clock, skipStalledCheck: true },
  )
  const lost: { n: number; message: string }[] = []
  w.on('lockLost', (job: Job, err: Error) => lost.push({ n: job.attemptsStarted, message: err.message }))

  await fx.queue.add('job', {}, { jobId: 'x', attempts: 2 })
  const run1 = await waitFor(() => runs.find((r) => r.n === 1), { what: 'first run' })
  // The worker stalls past its lease: the lease is gone and its deadline has passed; two sweeps recover it.
  await redis.client.del(fx.keys.lock('x'))
  await redis.client.zadd(fx.keys.active, 'XX', 0, 'x')
  const first = await sweep(redis.client, 'q', { graceMs: 0 })
  const second = await sweep(redis.client, 'q', { graceMs: 0 })
  expect([first.marked, second.recovered]).toEqual([['x'], ['x']])
  // The same worker (a free slot, woken by the recovery) takes the job again: a new run, a new token.
  const run2 = await waitFor(() => runs.find((r) => r.n === 2), { what: 'second run on the same worker' })

  // Its next heartbeat must report the recovered run lost (the job is held by another token now).
  await clock.advance(1_000)
  const run1Told = await waitFor(() => run1.signal.aborted, { timeoutMs: 1_500, what: 'run 1 to be aborted' }).then(
    () => true,
    () => false,
  )
  // The old run finishes anyway: its result is discarded (fenced); the new run must not pay for it.
  run1.release()
  await waitFor(() => lost.length > 0, { what: 'lockLost for the fenced-out run' })
  const run2AbortedBeforeRelease = run2.signal.aborted
  run2.release()
  const job = await waitFor(
    async () => {
      const j = await fx.queue.getJob('x')
      return j && (j.state === 'completed' || j.state === 'failed') ? j : undefined
    },
    { what: 'x to finish' },
  )

  console.log(
    `[chaos] retake: run1Told=${run1Told} lockLost=${JSON.stringify(lost)} run2Aborted=${run2AbortedBeforeRelease} ` +
      `final=${JSON.stringify({ state: job.state, attemptsMade: job.attemptsMade, attemptsStarted: job.attemptsStarted, returnValue: job.returnValue })}`,
  )
  expect(job).toMatchObject({ state: 'completed', returnValue: 'run2', attemptsMade: 1, stalledCounter: 1, attemptsStarted: 2 })
  expect(lost.map((l) => l.n)).toEqual([1])
  expect(run2AbortedBeforeRelease).toBe(false)
  expect(run1Told).toBe(true)
})
