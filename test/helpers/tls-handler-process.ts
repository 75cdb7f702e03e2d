/**
 * A child process that uses EchoMQ the way an application or the Lambda would: only through REDIS_URL
 * (a rediss:// URL; the test's CA comes from NODE_EXTRA_CA_CERTS). The parent sends requests over IPC:
 *   { seq, op: 'add', queue, jobId, attempts }   Queue.add on a Queue built from REDIS_URL
 *   { seq, op: 'sweep', queue }                  sweep(REDIS_URL, queue, { graceMs: 0 })
 *   { seq, op: 'handler' }                       one invocation of createHandler(process.env)
 * and gets { seq, ok: true, result } or { seq, ok: false, error: { name, code, message, inspected } }. A failure is
 * also printed to stderr the way applications log errors (console.error of the error object, with its
 * cause chain), so the parent can check that no secret reaches a log line.
 */
import { inspect } from 'node:util'
import { createHandler } from '../../functions/sweep.js'
import { Queue, sweep } from '../../lib/index.js'

interface Request {
  seq: number
  op: 'add' | 'sweep' | 'handler'
  queue?: string
  jobId?: string
  attempts?: number
}

const url = process.env.REDIS_URL
const handler = createHandler(process.env)
const context = { getRemainingTimeInMillis: () => 50_000 }

async function serve(req: Request): Promise<unknown> {
  switch (req.op) {
    case 'add': {
      // direct: a queue of a child process the test spawns, on the TLS URL under test
      const queue = new Queue(req.queue ?? 'q', { connection: url })
      try {
        return await queue.add('job', { from: 'tls child' }, { jobId: req.jobId ?? 'job', attempts: req.attempts ?? 3 })
      } finally {
        await queue.close()
      }
    }
    case 'sweep':
      return await sweep(url, req.queue ?? 'q', { graceMs: 0 })
    case 'handler':
      return await handler({}, context)
  }
}

process.on('message', (req: Request) => {
  serve(req).then(
    (result) => process.send?.({ seq: req.seq, ok: true, result }),
    (err: unknown) => {
      console.error(`[tls-child] ${req.op} failed:`, err)
      const e = err as { name?: string; code?: string; message?: string }
      // `inspected`: the whole error object with its cause chain, as a logger printing it in full would see it.
      process.send?.({
        seq: req.seq,
        ok: false,
        error: { name: e.name, code: e.code, message: e.message, inspected: inspect(err, { depth: null }) },
      })
    },
  )
})
process.send?.({ seq: 0, ok: true, result: 'ready' })
