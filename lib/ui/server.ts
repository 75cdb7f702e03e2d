/**
 * serveDashboard: the dashboard on its own node:http server (what `echomq ui` runs). Safe by default: it
 * binds 127.0.0.1; any other host is refused unless `auth` is given (HTTP Basic on every request), since a
 * dashboard acts on queues. Bound to loopback without auth, it answers only requests whose Host is a
 * loopback name with its port, so a web page cannot reach it through a domain rebound to 127.0.0.1.
 *
 * Options: those of createDashboard, plus host ('127.0.0.1') and port (3000; 0 picks a free one).
 * Resolves once it listens, to its URL and close() (stops the server, then the dashboard's connection).
 */
import { createServer, type Server } from 'node:http'
import { isIP } from 'node:net'
import { EchoMQError } from '../errors.js'
import { checkInteger, describe, fail } from '../validate.js'
import { createDashboard } from './handler.js'
import type { DashboardOptions } from './options.js'

export const UI_HOST_DEFAULT = '127.0.0.1'
export const UI_PORT_DEFAULT = 3000

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost'])

export const isLoopback = (host: string): boolean => LOOPBACK.has(host.toLowerCase()) || /^127\.\d+\.\d+\.\d+$/.test(host)

export interface ServeOptions extends DashboardOptions {
  host?: string
  port?: number
}

export interface ServedDashboard {
  url: string
  server: Server
  close(): Promise<void>
}

export async function serveDashboard(options: ServeOptions = {}): Promise<ServedDashboard> {
  const { host = UI_HOST_DEFAULT, port = UI_PORT_DEFAULT, ...rest } = options
  if (typeof host !== 'string' || host === '' || /[\s/]/.test(host))
    fail('ERR_OPTIONS', `expected host to be a host name or address, got: ${describe(host)}`)
  checkInteger('port', port, { min: 0, max: 65_535 })
  if (!isLoopback(host) && rest.auth === undefined) {
    throw new EchoMQError(
      'ERR_OPTIONS',
      `refusing to serve the dashboard on ${host} without auth: anyone who reaches it could act on your queues. ` +
        'Give auth (--auth user:password), or bind 127.0.0.1 and reach it through an SSH tunnel',
    )
  }
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address()
  const actual = typeof address === 'object' && address !== null ? address.port : port
  const shown = isIP(host) === 6 ? `[${host}]` : host
  const loopbackOnly = isLoopback(host) && rest.auth === undefined && rest.allowedHosts === undefined
  const allowedHosts = loopbackOnly
    ? [`127.0.0.1:${actual}`, `localhost:${actual}`, `[::1]:${actual}`, `${shown}:${actual}`.toLowerCase()]
    : rest.allowedHosts
  let dashboard: ReturnType<typeof createDashboard>
  try {
    dashboard = createDashboard({ ...rest, ...(allowedHosts ? { allowedHosts: [...new Set(allowedHosts)] } : {}) })
  } catch (err) {
    server.close()
    throw err
  }
  server.on('request', dashboard)
  let closing: Promise<void> | undefined
  return {
    url: `http://${shown}:${actual}${rest.basePath ?? ''}/`,
    server,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }).then(() => dashboard.close())
      return closing
    },
  }
}
