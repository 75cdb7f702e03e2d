/** Spawns held-worker.ts as a real child process (so it can be killed and stopped) and records what it reports. */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** From the sources (tsx, vitest) the child runs held-worker.ts through tsx; from the package, the built held-worker.js with plain node. */
const FROM_SOURCE = import.meta.url.endsWith('.ts')
const HELD_WORKER = fileURLToPath(new URL(FROM_SOURCE ? './held-worker.ts' : './held-worker.js', import.meta.url))

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

/** SIGKILLs a child process (unless it already exited) and resolves once it has. */
export async function killAndWait(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
}

export async function spawnWorker(env: Record<string, string>): Promise<WorkerProcess> {
  const child = fork(HELD_WORKER, [], {
    execArgv: FROM_SOURCE ? ['--import', 'tsx'] : [],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const messages: WorkerMessage[] = []
  const waiters = new Set<() => void>()
  child.on('message', (m: WorkerMessage) => {
    messages.push(m)
    for (const wake of waiters) wake()
  })
  child.on('exit', () => {
    for (const wake of waiters) wake()
  })
  const waitForMessage = (type: string, id?: string, timeoutMs = 15_000) =>
    new Promise<WorkerMessage>((resolve, reject) => {
      const check = () => {
        const found = messages.find((m) => m.type === type && (id === undefined || m.id === id))
        if (found || child.exitCode !== null || child.signalCode !== null) {
          waiters.delete(check)
          clearTimeout(timer)
          if (found) resolve(found)
          else reject(new Error(`worker process exited before reporting ${type} ${id ?? ''}`))
        }
      }
      const timer = setTimeout(() => {
        waiters.delete(check)
        reject(new Error(`timed out after ${timeoutMs} ms waiting for worker message ${type} ${id ?? ''}`))
      }, timeoutMs)
      waiters.add(check)
      check()
    })
  const handle: WorkerProcess = {
    child,
    messages,
    active: () => messages.filter((m) => m.type === 'active').map((m) => m.id ?? ''),
    waitForMessage,
    finish: (id) => child.send({ type: 'finish', id }),
    kill: (signal) => child.kill(signal),
    stop: () => killAndWait(child),
  }
  await handle.waitForMessage('ready')
  return handle
}
