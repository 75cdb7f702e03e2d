/** A local HTTP endpoint that answers PutMetricData (AWS JSON 1.0) and keeps each decoded request. */
import { createServer, type Server } from 'node:http'

export interface CapturedPut {
  target: string | undefined
  body: {
    Namespace: string
    MetricData: { MetricName: string; Value?: number; Values?: number[]; Unit?: string; Dimensions?: { Name: string; Value: string }[] }[]
  }
}

export async function startCloudWatchEndpoint(): Promise<{ url: string; requests: CapturedPut[]; close(): Promise<void> }> {
  const requests: CapturedPut[] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const target = req.headers['x-amz-target']
      requests.push({ target: Array.isArray(target) ? target[0] : target, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) })
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' })
      res.end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return { url: `http://127.0.0.1:${port}`, requests, close: () => new Promise((resolve) => server.close(() => resolve())) }
}
