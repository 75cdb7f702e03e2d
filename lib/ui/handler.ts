/**
 * createDashboard(options): the dashboard as a Node request handler, `(req, res, next?) => void`, to
 * mount under `basePath` in an existing server (node:http directly; Express with app.use(basePath, h);
 * Fastify with @fastify/middie's use(basePath, h); Hono on Node by handing it c.env.incoming and outgoing:
 * see the README, test/dashboard/ui-frameworks.test.ts runs each). A request outside `basePath` goes to `next` when
 * there is one, else gets a 404.
 *
 * Routes, under basePath:
 *   GET  /                              every queue: counts, paused or not, workers connected, the chart
 *   GET  /workers                       every worker of the queues shown, Redis's health (operator-page.ts)
 *   GET  /queues/:queue[?state&page&id] a queue's jobs in one state, a page at a time; `id` finds a job
 *   GET  /queues/:queue/timing          a queue's wait and processing time per minute (timing.ts)
 *   GET  /queues/:queue/jobs/:id[?logs] a job
 *   POST /queues/:queue                 action = pause | resume | retry-all | clean-completed | clean-failed
 *   POST /queues/:queue/jobs/:id        action = retry | remove | promote
 *   GET  /assets/app.css, /assets/app.js
 * A GET that accepts JSON gets the page's live values instead (layout.ts). Every page, a 404 too, carries a red
 * banner while a primary's maxmemory-policy is not noeviction (one INFO per page; CLIENT LIST, for the
 * workers, is kept CLIENT_LIST_TTL_MS, operator.ts). Every POST needs the page's
 * token (a random value made per handler and written into its forms): without it the request is refused
 * whatever its Origin, and in read-only mode every POST is refused.
 *
 * Guarantees: bad input is refused (4xx, a typed code) before any action, so nothing changes; every value
 * from Redis is rendered escaped; the Redis URL's password is never on a page (redactUrl). close() closes
 * the connection the handler opened (never a client it was given); calling it twice is safe.
 */
import { createHash, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { fileURLToPath } from 'node:url'
import { EchoMQError, redisError } from '../errors.js'
import { validateJobId, validateQueueName } from '../options.js'
import { closeConnection, lastConnectionError, openConnection, redactUrl, resilient, resolveUrl } from '../redis/connection.js'
import { DashboardError, describeFailure } from './errors.js'
import { acceptsJson, checkAuth, checkHost, params, redirect, securityHeaders, send, sendHtml, sendJson } from './http.js'
import { type DashboardOptions, dashboardSettings } from './options.js'
import { errorPage, type View } from './pages.js'
import { post } from './post.js'
import { QueueSet } from './read.js'
import { bannerNow, type Dashboard, jobScreen, overview, queueScreen, timingScreen, workersScreen } from './screens.js'

export type DashboardHandler = ((req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void) & {
  /** Closes the connection the dashboard opened (not a client it was given). */
  close(): Promise<void>
}

/** A Redis call the handler waits for at most this long before it answers 503 (the Queue's own bound). */
const COMMAND_TIMEOUT_MS = 5_000
const ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url))
const ASSET_TYPES: Record<string, string> = { 'app.css': 'text/css; charset=utf-8', 'app.js': 'text/javascript; charset=utf-8' }

interface Asset {
  body: Buffer
  type: string
  etag: string
}

function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>()
  for (const [name, type] of Object.entries(ASSET_TYPES)) {
    const body = readFileSync(`${ASSETS_DIR}${name}`)
    assets.set(name, { body, type, etag: `"${createHash('sha1').update(body).digest('hex').slice(0, 16)}"` })
  }
  return assets
}

type Handler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void

export function createDashboard(options?: DashboardOptions): DashboardHandler {
  const settings = dashboardSettings(options)
  const conn = openConnection(settings.connection, { redisOptions: resilient(undefined, COMMAND_TIMEOUT_MS) })
  const where = conn.owned ? redactUrl(resolveUrl(settings.connection)) : undefined
  const set = new QueueSet(conn.client, settings.prefix, settings.queues)
  const view = (notice?: string): View => ({
    base: settings.basePath,
    token: d.token,
    readOnly: settings.readOnly,
    where,
    refreshMs: settings.refreshMs,
    graceMs: settings.graceMs,
    pageSize: settings.pageSize,
    notice,
  })
  const d: Dashboard & { closing?: Promise<void> } = { settings, set, token: randomBytes(24).toString('base64url'), view }
  const assets = loadAssets()
  const fail = (req: IncomingMessage, res: ServerResponse, err: unknown): void => {
    // A plain command's failure (a read outside a Queue's calls) gets the library's code: ERR_CONNECTION...
    const known = err instanceof DashboardError || err instanceof EchoMQError
    void failed(d, req, res, known ? err : redisError(where ?? 'given', 'Redis', err, lastConnectionError(conn.client))).catch(() =>
      res.destroy(),
    )
  }

  const handler: Handler = (req, res, next) => {
    const target = new URL((req as { originalUrl?: string }).originalUrl ?? req.url ?? '/', 'http://dashboard.invalid')
    const base = settings.basePath
    if (target.pathname !== base && !target.pathname.startsWith(`${base}/`)) {
      if (next) next()
      else {
        securityHeaders(res)
        fail(req, res, new DashboardError('ERR_UI_NOT_FOUND', 'no such page'))
      }
      return
    }
    securityHeaders(res)
    if (target.pathname === base) redirect(res, `${base}/${target.search}`)
    else route(d, assets, req, res, target).catch((err: unknown) => fail(req, res, err))
  }

  return Object.assign(handler, {
    close(): Promise<void> {
      d.closing ??= set.close().then(() => closeConnection(conn))
      return d.closing
    },
  })
}

function allow(method: string | undefined, methods: string[]): void {
  if (!methods.includes(method ?? '')) throw new DashboardError('ERR_UI_METHOD', `this address takes ${methods.join(' or ')}`)
}

/** The address below basePath, split and decoded. */
function segmentsOf(target: URL, basePath: string): string[] {
  return target.pathname
    .slice(basePath.length + 1)
    .split('/')
    .map((seg) => {
      try {
        return decodeURIComponent(seg)
      } catch {
        throw new DashboardError('ERR_UI_INPUT', 'the address is not well-formed')
      }
    })
}

async function route(
  d: Dashboard & { closing?: Promise<void> },
  assets: Map<string, Asset>,
  req: IncomingMessage,
  res: ServerResponse,
  target: URL,
): Promise<void> {
  const s = d.settings
  if (s.allowedHosts) checkHost(req, s.allowedHosts)
  if (s.auth) checkAuth(req, s.auth)
  if (d.closing) throw new DashboardError('ERR_UI_CLOSED', 'the dashboard is closing')
  const method = req.method === 'HEAD' ? 'GET' : req.method
  const [first, name, third, id, ...rest] = segmentsOf(target, s.basePath)
  const query = target.searchParams
  if (first === 'assets' && name !== undefined && third === undefined) {
    allow(method, ['GET'])
    return asset(assets, req, res, name)
  }
  if (first === '' && name === undefined) {
    allow(method, ['GET'])
    return overview(d, req, res, params(query, ['page', 'done', 'n']))
  }
  if (first === 'workers' && name === undefined) {
    allow(method, ['GET'])
    return workersScreen(d, req, res, params(query, []))
  }
  if (first === 'queues' && name !== undefined && third === 'timing' && id === undefined) {
    allow(method, ['GET'])
    return timingScreen(d, res, validateQueueName(name), params(query, []))
  }
  if (first !== 'queues' || name === undefined || rest.length > 0 || (third !== undefined && (third !== 'jobs' || id === undefined))) {
    throw new DashboardError('ERR_UI_NOT_FOUND', 'no such page')
  }
  const queue = validateQueueName(name)
  const job = id === undefined ? undefined : validateJobId(id)
  allow(method, ['GET', 'POST'])
  if (method === 'POST') return post(d, req, res, queue, job)
  if (job === undefined) return queueScreen(d, req, res, queue, params(query, ['state', 'page', 'id', 'done', 'n']))
  return jobScreen(d, req, res, queue, job, params(query, ['logs', 'done', 'n']))
}

function asset(assets: Map<string, Asset>, req: IncomingMessage, res: ServerResponse, name: string): void {
  const found = assets.get(name)
  if (!found) throw new DashboardError('ERR_UI_NOT_FOUND', 'no such asset')
  res.setHeader('Cache-Control', 'no-cache')
  res.setHeader('ETag', found.etag)
  if (req.headers['if-none-match'] === found.etag) {
    res.statusCode = 304
    res.end()
    return
  }
  send(res, 200, found.type, found.body)
}

async function failed(d: Dashboard, req: IncomingMessage, res: ServerResponse, err: unknown): Promise<void> {
  const { status, code, message } = describeFailure(err)
  // A page not found (a mistyped address, a job removed) is a page like the others: it carries the banner.
  // A refusal learns nothing more, and a failure (5xx) does not ask a failing Redis again.
  const banner = status === 404 && !acceptsJson(req) ? await bannerNow(d) : undefined
  if (res.headersSent) {
    res.destroy()
    return
  }
  if (status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="EchoMQ", charset="UTF-8"')
  if (status === 405) res.setHeader('Allow', 'GET, POST')
  if (status === 413) res.setHeader('Connection', 'close')
  if (acceptsJson(req)) {
    sendJson(res, status, { error: { code, message } })
    return
  }
  // Unauthenticated requests, and requests for another host, learn nothing but that they are refused.
  const shown = status === 401 || code === 'ERR_UI_HOST' ? { ...d.view(), where: undefined } : d.view()
  sendHtml(res, status, errorPage({ ...shown, banner }, Date.now(), status, code, message))
}

export type { DashboardOptions }
