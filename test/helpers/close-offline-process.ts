/**
 * A process whose Worker never reaches Redis (CLOSE_URL: a port nothing listens on) and closes after
 * CLOSE_AFTER_MS, as a SIGTERM handler would. It prints what is left running once close() resolved; the
 * test checks that the process then exits on its own.
 */
import { Worker } from '../../lib/index.js'

// direct: the worker of a child process the test spawns, its own program
const worker = new Worker('q', async () => 'ok', { connection: process.env.CLOSE_URL as string })
worker.on('error', () => undefined)
await new Promise((resolve) => setTimeout(resolve, Number(process.env.CLOSE_AFTER_MS ?? 500)))
await worker.close()
const timers = process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'Immediate')
process.stdout.write(`${JSON.stringify({ closed: true, timers })}\n`)
