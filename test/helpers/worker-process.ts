/** Worker child processes for tests: the same held worker the demo uses (cli/held-worker.ts). */
export { spawnWorker, type WorkerMessage, type WorkerProcess } from '../../cli/worker-process.js'
