/** Worker child processes for tests: the same held worker the demo uses (cli/support/held-worker.ts). */
export { spawnWorker, type WorkerMessage, type WorkerProcess } from '../../cli/support/worker-process.js'
