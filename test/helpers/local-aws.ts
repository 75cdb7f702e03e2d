/**
 * What the local AWS endpoints share: a server on a free loopback port, and the environment the SDK's
 * real clients need to talk to one (a region and made-up credentials; no AWS account is involved).
 */
import type { Server } from 'node:net'
import { vi } from 'vitest'

/** Listens on a free loopback port; `close` stops it (waiting for its connections to end). */
export async function listenLocally(server: Server): Promise<{ port: number; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** Stubs the region and credentials, and each AWS_ENDPOINT_URL_* given; vi.unstubAllEnvs() undoes it. */
export function stubLocalAws(endpoints: Record<string, string> = {}): void {
  vi.stubEnv('AWS_REGION', 'eu-west-1')
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIATEST')
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'test')
  for (const [name, url] of Object.entries(endpoints)) vi.stubEnv(name, url)
}
