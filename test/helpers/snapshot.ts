/** Every key and its serialised value: two equal snapshots mean nothing in Redis changed. */
import type { Redis } from 'ioredis'

export async function snapshot(client: Redis): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const key of (await client.keys('*')).sort()) {
    const dumped = await client.dumpBuffer(key)
    out[key] = dumped ? dumped.toString('base64') : ''
  }
  return out
}
