/**
 * A Worker closed while Redis is unreachable lets its process exit: no reconnect and no wait for replies
 * that cannot come stay scheduled, so a SIGTERM handler that awaits close() ends the
 * process rather than holding it for a lease.
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { freePort } from '../helpers/redis-server.js'

const CHILD = fileURLToPath(new URL('../helpers/close-offline-process.ts', import.meta.url))

it('a worker closed with Redis unreachable leaves no timer, and its process exits', async () => {
  const port = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: { ...process.env, CLOSE_URL: `redis://127.0.0.1:${port}`, CLOSE_AFTER_MS: '500' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (chunk) => (out += chunk))
  // Before the fix the process lived a whole lease (30 s) after close(); what may remain is ioredis's own
  // disconnectTimeout (2 s) on the socket it was trying.
  const exit = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      resolve(null)
    }, 10_000)
    child.once('exit', (code) => {
      clearTimeout(timer)
      resolve(code)
    })
  })
  const report = JSON.parse(out.trim()) as { closed: boolean; timers: string[] }
  expect(report.closed).toBe(true)
  expect(report.timers.length).toBeLessThanOrEqual(1)
  expect(exit).toBe(0)
}, 30_000)
