/** Spawns test/fixtures/worker-process.ts as a real child process and records what it reports. */
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { waitFor } from './wait.js'

const FIXTURE = fileURLToPath(new URL('../fixtures/worker-process.ts', import.meta.url))

export interface WorkerMessage {
  type: string
  id?: string
  message?: string
}

export interface WorkerProcess {
  child: ChildProcess
  messages: WorkerMessage[]
  /** Ids of the jobs the process has taken. */
  active(): string[]
  waitForMessage(type: string, id?: string, timeoutMs?: number): Promise<WorkerMessage>
  finish(id: string): void
  kill(signal: NodeJS.Signals): void
  stop(): Promise<void>
}

export async function spawnWorker(env: Record<string, string>): Promise<WorkerProcess> {
  const child = fork(FIXTURE, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const messages: WorkerMessage[] = []
  child.on('message', (m: WorkerMessage) => messages.push(m))
  const handle: WorkerProcess = {
    child,
    messages,
    active: () => messages.filter((m) => m.type === 'active').map((m) => m.id ?? ''),
    waitForMessage: (type, id, timeoutMs = 15_000) =>
      waitFor(() => messages.find((m) => m.type === type && (id === undefined || m.id === id)), { timeoutMs, what: `worker message ${type} ${id ?? ''}` }),
    finish: (id) => child.send({ type: 'finish', id }),
    kill: (signal) => child.kill(signal),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    },
  }
  await handle.waitForMessage('ready')
  return handle
}
