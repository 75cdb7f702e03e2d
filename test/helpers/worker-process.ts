/** Worker child processes for tests: the same held worker the demo uses (cli/support/held-worker.ts). */
import { afterEach } from 'vitest'
import { spawnWorker, type WorkerProcess } from '../../cli/support/worker-process.js'

export { spawnWorker, type WorkerMessage, type WorkerProcess } from '../../cli/support/worker-process.js'

/** Spawns worker processes (spawnWorker's environment) that are stopped after each test. */
export function useWorkerProcesses(): (env: Record<string, string>) => Promise<WorkerProcess> {
  const children: WorkerProcess[] = []
  afterEach(async () => {
    await Promise.all(children.splice(0).map((c) => c.stop()))
  })
  return async (env) => {
    const child = await spawnWorker(env)
    children.push(child)
    return child
  }
}
