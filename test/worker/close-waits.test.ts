/**
 * close() as BullMQ's: it waits for running jobs (no timeout unless asked), close(true) does not wait,
 * and a job whose processor still runs is never put back in line for another worker to run it too.
 * Worker processes are real; the second worker is the one a rolling deploy starts.
 */
import { expect, it } from 'vitest'
import type { EchoMQError } from '../../lib/index.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { nextEvent, waitFor } from '../helpers/wait.js'
import { useWorkerProcesses } from '../helpers/worker-process.js'

const redis = useRedis()
const fx = useQueue(redis, { close: (w) => w.close(true) })
const spawnWorker = useWorkerProcesses()
const { keys } = fx

/** A processor that runs `ms` and records each run and its end (`<id>:end`). */
function slow(ms: number, runs: string[]) {
  return async (job: { id: string }) => {
    runs.push(job.id)
    await new Promise((resolve) => setTimeout(resolve, ms))
    runs.push(`${job.id}:end`)
    return 'sent'
  }
}

it('close() waits for a running job longer than the old 5 s timeout; a second worker never runs it', async () => {
  const runs: string[] = []
  const first = fx.worker(slow(5_600, runs), { lockDuration: 1_000 })
  await Promise.all([nextEvent(first, 'active'), fx.queue.add('deploy', {}, { jobId: 'long' })])
  // The rolling deploy: the new worker is up while the old one closes.
  fx.worker(slow(10, runs), { lockDuration: 1_000 })

  const t0 = performance.now()
  await first.close()
  const closeMs = performance.now() - t0

  expect(closeMs).toBeGreaterThan(5_000)
  expect(await fx.queue.getJob('long')).toMatchObject({ state: 'completed', attemptsMade: 1, returnValue: 'sent' })
  expect(runs).toEqual(['long', 'long:end'])
}, 20_000)

it('past an explicit closeTimeout, a processor that ignores the abort keeps its job out of line: no second run while it runs', async () => {
  const runs: string[] = []
  const first = fx.worker(slow(1_200, runs), { lockDuration: 2_000, closeTimeout: 200 })
  const errors: EchoMQError[] = []
  first.on('error', (err) => errors.push(err as EchoMQError))
  await Promise.all([nextEvent(first, 'active'), fx.queue.add('deploy', {}, { jobId: 'over' })])
  fx.worker(slow(10, runs), { lockDuration: 2_000, stalledInterval: 100 })

  await first.close()

  expect(errors.map((e) => e.code)).toContain('ERR_CLOSED')
  expect(await fx.queue.getJob('over')).toMatchObject({ state: 'active', attemptsMade: 0 })
  // The first processor ends 1.2 s after it began; its lease (2 s) outlives it: nobody ran the job meanwhile.
  await waitFor(() => runs.includes('over:end'), { what: 'the abandoned processor to end' })
  expect(runs).toEqual(['over', 'over:end'])
  expect(await fx.queue.getJob('over')).toMatchObject({ state: 'active' })
})

it('close(true) does not wait: a cooperative processor is aborted and its job goes back without an attempt used', async () => {
  const first = fx.worker(
    (_job, _token, signal) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
    { lockDuration: 5_000 },
  )
  await Promise.all([nextEvent(first, 'active'), fx.queue.add('deploy', {}, { jobId: 'forced' })])

  const t0 = performance.now()
  await first.close(true)

  expect(performance.now() - t0).toBeLessThan(1_000)
  expect(await fx.queue.getJob('forced')).toMatchObject({ state: 'wait', attemptsMade: 0, attemptsStarted: 1 })
  expect(await redis.client.exists(keys.lock('forced'))).toBe(0)
})

it('a worker process asked to close finishes its held job first (real process, default options)', async () => {
  const w = await spawnWorker({ REDIS_URL: redis.url, QUEUE: 'q', LOCK_MS: '500', HEARTBEAT_MS: '100', SKIP_STALLED_CHECK: '1' })
  await fx.queue.add('deploy', {}, { jobId: 'held' })
  await waitFor(() => w.active().includes('held'), { what: 'the process to take the job' })
  const exited = new Promise((resolve) => w.child.once('exit', resolve))

  const asked = performance.now()
  w.child.send({ type: 'close' })
  // Past several leases (500 ms): close() keeps renewing and waiting.
  await waitFor(async () => performance.now() - asked > 1_500 && (await redis.client.exists(keys.lock('held'))) === 1, {
    what: 'the lease still held 1.5 s after close() was asked',
  })
  expect(w.child.exitCode).toBeNull()
  expect(await fx.queue.getJob('held')).toMatchObject({ state: 'active' })
  w.finish('held')
  await exited

  expect(await fx.queue.getJob('held')).toMatchObject({ state: 'completed', attemptsMade: 1 })
})
