/** Test cleanup that cannot hang: close() with a deadline (a close() that hangs is reported by its own test). */
import type { Redis } from 'ioredis'
import type { Worker } from '../../lib/index.js'
import { pause } from './config.js'

export async function closeWithin(w: Worker, ms = 1_500): Promise<boolean> {
  const closed = await Promise.race([w.close().then(() => true), pause(ms).then(() => false)])
  if (!closed) {
    const stuck = (w as unknown as { core: { conn: { client: Redis }; blocking: Redis } }).core
    stuck.conn.client.disconnect()
    stuck.blocking.disconnect()
    console.log(`[chaos] cleanup: worker ${w.id} did not close within ${ms} ms; its connections were dropped`)
  }
  return closed
}
