/**
 * A worker in its own process, so the demo (and the tests) can SIGKILL and SIGSTOP it. Configured by
 * environment: REDIS_URL, QUEUE, PREFIX, LOCK_MS, HEARTBEAT_MS, CONCURRENCY, WORKER_NAME, STALLED_INTERVAL_MS,
 * MAX_STALLED_COUNT, SKIP_STALLED_CHECK, FREEZE_ON_COMPLETED (after reporting a completed job the process
 * freezes, its event loop blocked, until killed: a crash right after a finish; a flow child's parent is
 * told before its event, so a test that needs the crash before that telling refuses it by ACL). Each job is held until the
 * parent sends { type: 'finish', id } (or its signal aborts); the result names this process. Reports
 * 'ready', 'active', 'completed', 'failed', 'lockLost' and 'error' to the parent over IPC.
 */
import { Worker } from '../../lib/index.js'

const env = (name: string, fallback: string) => process.env[name] ?? fallback
const send = (message: object) => process.send?.(message)
const pending = new Map<string, () => void>()

const worker = new Worker(
  env('QUEUE', 'q'),
  (job, _token, signal) =>
    new Promise((resolve, reject) => {
      pending.set(job.id, () => resolve({ doneBy: process.pid }))
      signal.addEventListener('abort', () => reject(signal.reason))
      send({ type: 'active', id: job.id, attemptsStarted: job.attemptsStarted })
    }),
  {
    connection: env('REDIS_URL', 'redis://127.0.0.1:6379'),
    prefix: env('PREFIX', 'emq'),
    ...(process.env.WORKER_NAME ? { name: process.env.WORKER_NAME } : {}),
    lockDuration: Number(env('LOCK_MS', '500')),
    heartbeatInterval: Number(env('HEARTBEAT_MS', '100')),
    concurrency: Number(env('CONCURRENCY', '1')),
    // The worker's own stalled sweep (BullMQ's options), when a test or the demo sets them.
    ...(process.env.STALLED_INTERVAL_MS ? { stalledInterval: Number(process.env.STALLED_INTERVAL_MS) } : {}),
    ...(process.env.MAX_STALLED_COUNT ? { maxStalledCount: Number(process.env.MAX_STALLED_COUNT) } : {}),
    ...(process.env.SKIP_STALLED_CHECK ? { skipStalledCheck: true } : {}),
  },
)
worker.on('completed', (job) => {
  send({ type: 'completed', id: job.id })
  // Frozen, as a process that dies right after the finish: nothing after it runs (bounded: a minute).
  if (process.env.FREEZE_ON_COMPLETED) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000)
})
worker.on('failed', (job) => send({ type: 'failed', id: job.id }))
worker.on('lockLost', (job) => send({ type: 'lockLost', id: job.id }))
worker.on('error', (err: Error) => send({ type: 'error', message: err.message }))

process.on('message', (message: { type: string; id?: string }) => {
  if (message.type === 'finish' && message.id) pending.get(message.id)?.()
  if (message.type === 'close') void worker.close().then(() => process.exit(0))
})
process.on('disconnect', () => process.exit(0)) // the parent is gone
send({ type: 'ready' })
