/** What a queue's meta holds of the reaper's count of failed jobs and its claim (lua/claim-1.lua). */
import type { Redis } from 'ioredis'
import { queueKeys } from '../../lib/redis/keys.js'

const FIELDS = ['failedNew', 'failedClaim', 'failedClaimed', 'failedClaimUntil'] as const

/** The count and its claim, as meta holds them (absent fields left out). */
export async function failedCount(client: Redis, queue: string, prefix = 'emq'): Promise<Record<string, string>> {
  const values = await client.hmget(queueKeys(prefix, queue).meta, ...FIELDS)
  const out: Record<string, string> = {}
  FIELDS.forEach((field, i) => {
    const value = values[i]
    if (value !== null && value !== undefined) out[field] = value
  })
  return out
}
