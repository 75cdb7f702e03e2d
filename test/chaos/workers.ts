/** Spawns test/chaos/fixtures/chaos-worker.ts processes and keeps everything each one reported. */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { waitFor } from '../helpers/wait.js'

const FIXTURE = fileURLToPath(new URL('./fixtures/chaos-worker.ts', import.meta.url))

export interface ChaosMessage {
  t: 'ready' | 's' | 'c' | 'f' | 'l' | 'e' | 'd' | 'bye'
  id?: string
  n?: number
  /** A start's time (ms since the epoch, sub-ms: performance.timeOrigin + now() in the worker). */
  at?: number
  r?: { pid: number; n: number; wid: string }
  state?: string
  code?: string
  msg?: string
  wid?: string
}

export interface ChaosWorker {
  proc: ChildProcess
  pid: number
  wid: string
  messages: ChaosMessage[]
  killed: boolean
  paused: boolean
  /** Resolves once the process has exited and its IPC channel is closed: every message has arrived. */
  closed: Promise<void>
}

export async function spawnChaosWorker(env: Record<string, string>): Promise<ChaosWorker> {
  const proc = fork(FIXTURE, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const messages: ChaosMessage[] = []
  proc.on('message', (m: ChaosMessage) => messages.push(m))
  const closed = new Promise<void>((resolve) => proc.once('close', () => resolve()))
  const ready = await waitFor(
    () => messages.find((m) => m.t === 'ready') ?? (proc.exitCode !== null ? Promise.reject(new Error('exited')) : undefined),
    {
      timeoutMs: 30_000,
      what: 'chaos worker to start',
    },
  ).catch(async (err: unknown) => {
    // Not left running untracked: a process that is too slow to start is killed before the error goes on.
    proc.kill('SIGKILL')
    await closed
    throw err
  })
  return { proc, pid: proc.pid ?? 0, wid: ready.wid ?? '', messages, killed: false, paused: false, closed }
}

/** Asks a worker to close (every job must be finished by then) and waits for its last message. */
export async function retire(w: ChaosWorker, timeoutMs = 10_000): Promise<'bye' | 'killed'> {
  if (w.killed || w.proc.exitCode !== null || w.proc.signalCode !== null) {
    await w.closed
    return 'killed'
  }
  if (w.paused) w.proc.kill('SIGCONT')
  w.proc.send({ t: 'exit' })
  let said = true
  await waitFor(() => w.messages.some((m) => m.t === 'bye'), { timeoutMs, what: `worker ${w.pid} to close` }).catch(() => (said = false))
  w.proc.kill('SIGKILL')
  await w.closed
  return said ? 'bye' : 'killed'
}
