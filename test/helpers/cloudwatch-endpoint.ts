/**
 * A local HTTP endpoint that answers PutMetricData (AWS JSON 1.0) and keeps each decoded request; `failWith`
 * makes it answer with an AWS error (status, __type, request id) instead; `holdUntil(n)` holds the answers
 * until n requests are waiting, then gives them all at once (overlapping publishers, every one of them
 * between its call and its answer at the same moment). `startBlackhole` accepts
 * connections and never answers: an AWS API without a route, as from a VPC with no NAT or endpoint.
 */
import { createServer, type Server } from 'node:http'
import { createServer as createTcpServer, type Socket } from 'node:net'
import { listenLocally } from './local-aws.js'

interface CapturedPut {
  target: string | undefined
  body: {
    Namespace: string
    MetricData: { MetricName: string; Value?: number; Values?: number[]; Unit?: string; Dimensions?: { Name: string; Value: string }[] }[]
  }
}

export const CLOUDWATCH_REQUEST_ID = 'cw-test-request-id'

export interface CloudWatchEndpoint {
  url: string
  requests: CapturedPut[]
  failWith(error: { status: number; type: string; message: string } | undefined): void
  /** Holds the next answers until `n` requests wait, then answers them all (once). */
  holdUntil(n: number): void
  close(): Promise<void>
}

export async function startCloudWatchEndpoint(): Promise<CloudWatchEndpoint> {
  const requests: CapturedPut[] = []
  let failure: { status: number; type: string; message: string } | undefined
  let held: { n: number; answers: (() => void)[] } | undefined
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const target = req.headers['x-amz-target']
      requests.push({ target: Array.isArray(target) ? target[0] : target, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) })
      const answer = () => {
        res.writeHead(failure?.status ?? 200, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': CLOUDWATCH_REQUEST_ID })
        res.end(failure ? JSON.stringify({ __type: failure.type, message: failure.message }) : '{}')
      }
      if (!held) return answer()
      held.answers.push(answer)
      if (held.answers.length < held.n) return
      const answers = held.answers
      held = undefined
      for (const a of answers) a()
    })
  })
  const { port, close } = await listenLocally(server)
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    failWith: (error) => {
      failure = error
    },
    holdUntil: (n) => {
      held = { n, answers: [] }
    },
    close,
  }
}

/** A TCP endpoint that accepts and never answers. */
export async function startBlackhole(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets: Socket[] = []
  const { port, close } = await listenLocally(createTcpServer((s) => void sockets.push(s)))
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const s of sockets) s.destroy()
      await close()
    },
  }
}
