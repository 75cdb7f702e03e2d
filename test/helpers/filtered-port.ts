/**
 * A port that drops connection attempts, as one behind a security group or firewall that does not let the
 * client in: a redis-server listening with a backlog of 0, stopped (SIGSTOP) so it accepts nothing, its
 * one queue place taken by a held connection. The kernel then drops every further SYN and a client's
 * connect() waits until its own timeout, which is what a filtered port does (no refusal, no answer).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { spawnRedisServer } from '../../cli/support/local-redis.js'
import { freePort } from './redis-server.js'
import { waitFor } from './wait.js'

export interface FilteredPort {
  port: number
  url: string
  stop(): Promise<void>
}

/** Resolves true when a TCP connection to the port completes within `ms`. */
function connects(port: number, ms: number, held: net.Socket[]): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    held.push(socket)
    socket.on('error', () => undefined)
    const timer = setTimeout(() => resolve(false), ms)
    socket.once('connect', () => {
      clearTimeout(timer)
      resolve(true)
    })
  })
}

export async function startFilteredPort(): Promise<FilteredPort> {
  const port = await freePort()
  const dir = mkdtempSync(path.join(tmpdir(), 'emq-filtered-'))
  const child = spawnRedisServer(port, dir, ['--tcp-backlog', '0'])
  const held: net.Socket[] = []
  const stop = async () => {
    for (const socket of held) socket.destroy()
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await waitFor(() => connects(port, 200, held), { what: `redis-server on port ${port}` })
    child.kill('SIGSTOP')
    // Fill the accept queue until a connection no longer completes: from then on SYNs are dropped.
    await waitFor(async () => !(await connects(port, 300, held)), { timeoutMs: 5_000, what: `port ${port} to drop connections` })
  } catch (err) {
    await stop()
    throw err
  }
  return { port, url: `redis://127.0.0.1:${port}`, stop }
}
