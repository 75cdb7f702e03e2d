/**
 * A worker function (echomq/lambda) in a process of its own, as a Lambda container: each `invoke` message
 * runs one invocation with a context whose remaining time runs down from `remainingMs`, and the reply
 * says what it returned and which timers and immediates were still active once its promise settled.
 * Jobs: `{ ms }` runs that long (honouring the signal unless `ignoreSignal`), `{ hold: true }` waits for
 * a `finish` message; after the run a job with `lateWrite` tries a progress write and reports its outcome.
 * Env: REDIS_URL, QUEUE, LOCK_MS, JOB_TIMEOUT_MS, RESERVE_MS, CONCURRENCY.
 */
import { createWorkerHandler } from '../../lib/lambda/index.js'

const send = (m: object) => process.send?.(m)
const releases = new Map<string, () => void>()

interface JobData {
  ms?: number
  hold?: boolean
  ignoreSignal?: boolean
  lateWrite?: boolean
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => {
      clearTimeout(timer)
      reject(signal.reason)
    })
  })

const handler = createWorkerHandler<JobData>(
  process.env.QUEUE ?? 'q',
  async (job, _token, signal) => {
    send({ type: 'active', id: job.id })
    const data = job.data ?? {}
    try {
      if (data.hold) await new Promise<void>((resolve) => releases.set(job.id, resolve))
      else await sleep(data.ms ?? 0, data.ignoreSignal ? undefined : signal)
    } finally {
      if (data.lateWrite) {
        job.updateProgress(100).then(
          () => send({ type: 'late', id: job.id, outcome: 'written' }),
          (err: { code?: string }) => send({ type: 'late', id: job.id, outcome: err.code ?? 'error' }),
        )
      }
    }
    return job.id
  },
  {
    lockDuration: Number(process.env.LOCK_MS ?? 1000),
    concurrency: Number(process.env.CONCURRENCY ?? 1),
    ...(process.env.JOB_TIMEOUT_MS ? { jobTimeoutMs: Number(process.env.JOB_TIMEOUT_MS) } : {}),
    ...(process.env.RESERVE_MS ? { reserveMs: Number(process.env.RESERVE_MS) } : {}),
  },
)

const timersLeft = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'Immediate')

process.on('message', async (m: { type: string; id?: string; remainingMs?: number; event?: unknown }) => {
  if (m.type === 'finish' && m.id) releases.get(m.id)?.()
  if (m.type === 'invoke') {
    const deadline = performance.now() + (m.remainingMs ?? 60_000)
    const context = {
      awsRequestId: `r${Math.random().toString(36).slice(2)}`,
      getRemainingTimeInMillis: () => Math.max(0, deadline - performance.now()),
    }
    try {
      const result = await handler(m.event, context)
      send({ type: 'result', result, timers: timersLeft() })
    } catch (err) {
      send({ type: 'result', error: { code: (err as { code?: string }).code, message: (err as Error).message }, timers: timersLeft() })
    }
  }
  if (m.type === 'exit') await handler.close().finally(() => process.exit(0))
})
send({ type: 'ready' })
