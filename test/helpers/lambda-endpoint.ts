/**
 * A local Lambda endpoint (AWS_ENDPOINT_URL_LAMBDA) that answers Invoke (REST: POST
 * /2015-03-31/functions/<name>/invocations) as Lambda answers an asynchronous one, 202 with no body, and
 * keeps each call: the function, the invocation type, the payload. `onInvoke` runs something for each call
 * (a test's worker function), after the answer, as Lambda runs an Event invocation after accepting it.
 */
import { createServer } from 'node:http'
import { listenLocally } from './local-aws.js'

interface InvokeCall {
  function: string
  invocationType: string | undefined
  payload: unknown
}

export interface LambdaEndpoint {
  url: string
  calls: InvokeCall[]
  onInvoke(run: ((call: InvokeCall) => Promise<unknown>) | undefined): void
  /** Runs started by onInvoke, settled. */
  settled(): Promise<unknown>
  close(): Promise<void>
}

export async function startLambdaEndpoint(): Promise<LambdaEndpoint> {
  const calls: InvokeCall[] = []
  const runs: Promise<unknown>[] = []
  let run: ((call: InvokeCall) => Promise<unknown>) | undefined
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const match = /^\/2015-03-31\/functions\/([^/]+)\/invocations/.exec(req.url ?? '')
      if (req.method !== 'POST' || !match?.[1]) {
        res.writeHead(404, { 'content-type': 'application/json', 'x-amzn-errortype': 'ResourceNotFoundException' })
        res.end(JSON.stringify({ message: `no such route: ${req.method} ${req.url}` }))
        return
      }
      const type = req.headers['x-amz-invocation-type']
      const body = Buffer.concat(chunks).toString('utf8')
      const call = {
        function: decodeURIComponent(match[1]),
        invocationType: Array.isArray(type) ? type[0] : type,
        payload: body ? JSON.parse(body) : undefined,
      }
      calls.push(call)
      res.writeHead(202, { 'x-amzn-requestid': `req-${calls.length}` })
      res.end()
      if (run) runs.push(run(call).catch(() => undefined))
    })
  })
  const { port, close } = await listenLocally(server)
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    onInvoke: (fn) => {
      run = fn
    },
    settled: () => Promise.all(runs),
    close,
  }
}
