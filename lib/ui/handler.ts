/**
 * createDashboard(options): the dashboard as a Node request handler, `(req, res, next?) => void`, to
 * mount under `basePath` in an existing server (node:http directly; Express with app.use(basePath, h);
 * Fastify with @fastify/middie's use(basePath, h); Hono on Node by handing it c.env.incoming and outgoing:
 * see the README, test/ui-frameworks.test.ts runs each). A request outside `basePath` goes to `next` when
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
 * A GET that accepts JSON gets the page's live values instead (layout.ts). Every page carries a red banner
 * while a primary's maxmemory-policy is not noeviction (one INFO per page). Every POST needs the page's
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
import type { JobState } from '../job.js'
import { validateJobId, validateQueueName } from '../options.js'
import { closeConnection, lastConnectionError, openConnection, redactUrl, resilient, resolveUrl } from '../redis/connection.js'
import { serverTimeMs } from '../redis/queries.js'
import { DONE_CODES, JOB_ACTIONS, jobAction, notice, type Outcome, QUEUE_ACTIONS, queueAction } from './actions.js'
import { DashboardError, describeFailure } from './errors.js'
import type { Html } from './html.js'
import {
  acceptsJson,
  checkAuth,
  checkHost,
  oneOf,
  pageNumber,
  params,
  readForm,
  redirect,
  sameSecret,
  securityHeaders,
  send,
  sendHtml,
  sendJson,
} from './http.js'
import { readHealth } from './operator.js'
import { healthBanner, timingPage, workersPage } from './operator-page.js'
import { type DashboardOptions, type DashboardSettings, dashboardSettings } from './options.js'
import { confirmPage, errorPage, jobPage, jobPath, overviewPage, queuePage, queuePath, type View } from './pages.js'
import { LISTED_STATES, QueueSet, readJobPage, readOverview, readQueuePage, readTimingPage, readWorkersPage } from './read.js'

export type DashboardHandler = ((req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void) & {
  /** Closes the connection the dashboard opened (not a client it was given). */
  close(): Promise<void>
}

/** A Redis call the handler waits for at most this long before it answers 503 (the Queue's own bound). */
const COMMAND_TIMEOUT_MS = 5_000
/** Queues on one overview page. */
const OVERVIEW_PAGE = 500
/** Log lines on one job page. */
const LOG_PAGE = 100

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

const shapeOf = (parts: string[]) => createHash('sha1').update(parts.join('\n')).digest('hex').slice(0, 12)

export function createDashboard(options?: DashboardOptions): DashboardHandler {
  const settings = dashboardSettings(options)
  const conn = openConnection(settings.connection, { redisOptions: resilient(undefined, COMMAND_TIMEOUT_MS) })
  const where = conn.owned ? redactUrl(resolveUrl(settings.connection)) : undefined
  const set = new QueueSet(conn.client, settings.prefix, settings.queues)
  const assets = loadAssets()
  const token = randomBytes(24).toString('base64url')
  let closing: Promise<void> | undefined

  const view = (notice?: string): View => ({
    base: settings.basePath,
    token,
    readOnly: settings.readOnly,
    where,
    refreshMs: settings.refreshMs,
    graceMs: settings.graceMs,
    pageSize: settings.pageSize,
    notice,
  })

  const handler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): void => {
    const target = new URL((req as { originalUrl?: string }).originalUrl ?? req.url ?? '/', 'http://dashboard.invalid')
    const base = settings.basePath
    if (target.pathname !== base && !target.pathname.startsWith(`${base}/`)) {
      if (next) next()
      else {
        securityHeaders(res)
        sendHtml(res, 404, errorPage(view(), Date.now(), 404, 'ERR_UI_NOT_FOUND', 'no such page'))
      }
      return
    }
    securityHeaders(res)
    if (target.pathname === base) redirect(res, `${base}/${target.search}`)
    else route(req, res, target, settings).catch((err: unknown) => fail(req, res, err))
  }

  async function route(req: IncomingMessage, res: ServerResponse, target: URL, s: DashboardSettings): Promise<void> {
    if (s.allowedHosts) checkHost(req, s.allowedHosts)
    if (s.auth) checkAuth(req, s.auth)
    if (closing) throw new DashboardError('ERR_UI_CLOSED', 'the dashboard is closing')
    const method = req.method === 'HEAD' ? 'GET' : req.method
    const segments = target.pathname.slice(s.basePath.length + 1).split('/')
    const decoded = segments.map((seg) => {
      try {
        return decodeURIComponent(seg)
      } catch {
        throw new DashboardError('ERR_UI_INPUT', 'the address is not well-formed')
      }
    })
    const [first, name, third, id, ...rest] = decoded
    if (first === 'assets' && name !== undefined && third === undefined) return asset(req, res, method, name)
    if (first === '' && name === undefined) {
      allow(method, ['GET'])
      return overview(req, res, params(target.searchParams, ['page', 'done', 'n']))
    }
    if (first === 'workers' && name === undefined) {
      allow(method, ['GET'])
      return workers(req, res, params(target.searchParams, []))
    }
    if (first === 'queues' && name !== undefined && third === 'timing' && id === undefined) {
      allow(method, ['GET'])
      return timing(res, validateQueueName(name), params(target.searchParams, []))
    }
    if (first !== 'queues' || name === undefined || rest.length > 0 || (third !== undefined && (third !== 'jobs' || id === undefined))) {
      throw new DashboardError('ERR_UI_NOT_FOUND', 'no such page')
    }
    const queue = validateQueueName(name)
    if (id === undefined) {
      allow(method, ['GET', 'POST'])
      if (method === 'POST') return post(req, res, queue, undefined)
      return queuePageOf(req, res, queue, params(target.searchParams, ['state', 'page', 'id', 'done', 'n']))
    }
    const job = validateJobId(id)
    allow(method, ['GET', 'POST'])
    if (method === 'POST') return post(req, res, queue, job)
    return jobPageOf(req, res, queue, job, params(target.searchParams, ['logs', 'done', 'n']))
  }

  function allow(method: string | undefined, methods: string[]): void {
    if (!methods.includes(method ?? '')) throw new DashboardError('ERR_UI_METHOD', `this address takes ${methods.join(' or ')}`)
  }

  function asset(req: IncomingMessage, res: ServerResponse, method: string | undefined, name: string): void {
    allow(method, ['GET'])
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

  function noticeOf(q: Record<string, string>): string | undefined {
    if (q.done === undefined) {
      if (q.n !== undefined) throw new DashboardError('ERR_UI_INPUT', 'query parameter "n" goes with "done"')
      return undefined
    }
    const done = oneOf('done', q.done, DONE_CODES)
    if (q.n !== undefined && !/^\d{1,9}$/.test(q.n)) throw new DashboardError('ERR_UI_INPUT', 'expected n to be a count from 0')
    return notice(done, Number(q.n ?? 0))
  }

  async function overview(req: IncomingMessage, res: ServerResponse, q: Record<string, string>): Promise<void> {
    const pageNo = pageNumber('page', q.page)
    const start = (pageNo - 1) * OVERVIEW_PAGE
    const [data, banner] = await Promise.all([readOverview(set, start, OVERVIEW_PAGE), bannerNow()])
    const shape = shapeOf(data.rows.map((r) => `${r.name}:${r.paused}`))
    const out = overviewPage({ ...view(noticeOf(q)), banner }, data, start, OVERVIEW_PAGE, shape)
    if (acceptsJson(req)) return sendJson(res, 200, out.live.json())
    sendHtml(res, 200, out.html)
  }

  async function queuePageOf(req: IncomingMessage, res: ServerResponse, name: string, q: Record<string, string>): Promise<void> {
    if (q.id !== undefined) {
      if (Object.keys(q).length > 1) throw new DashboardError('ERR_UI_INPUT', 'query parameter "id" goes alone')
      return redirect(res, jobPath(settings.basePath, name, validateJobId(q.id.trim())))
    }
    const state: JobState = q.state === undefined ? 'active' : oneOf('state', q.state, LISTED_STATES)
    const pageNo = pageNumber('page', q.page)
    const start = (pageNo - 1) * settings.pageSize
    const [data, banner] = await Promise.all([readQueuePage(set, name, state, start, settings.pageSize), bannerNow()])
    const shape = shapeOf([String(data.paused), String(data.workers === 0), ...data.jobs.map((j) => j.id)])
    const out = queuePage({ ...view(noticeOf(q)), banner }, data, shape)
    if (acceptsJson(req)) return sendJson(res, 200, out.live.json())
    sendHtml(res, 200, out.html)
  }

  async function jobPageOf(req: IncomingMessage, res: ServerResponse, name: string, id: string, q: Record<string, string>): Promise<void> {
    const logStart = (pageNumber('logs', q.logs) - 1) * LOG_PAGE
    const [data, banner] = await Promise.all([readJobPage(set, name, id, logStart, LOG_PAGE), bannerNow()])
    const out = jobPage({ ...view(noticeOf(q)), banner }, data, LOG_PAGE)
    if (acceptsJson(req)) return sendJson(res, 200, out.live.json())
    sendHtml(res, 200, out.html)
  }

  /** The red banner while Redis may evict keys; none when INFO cannot be read (the workers page says why). */
  async function bannerNow(): Promise<Html | undefined> {
    try {
      return healthBanner(await readHealth(set))
    } catch {
      return undefined
    }
  }

  async function timing(res: ServerResponse, name: string, q: Record<string, string>): Promise<void> {
    const [data, banner] = await Promise.all([readTimingPage(set, name), bannerNow()])
    sendHtml(res, 200, timingPage({ ...view(noticeOf(q)), banner }, data, queuePath(settings.basePath, name)))
  }

  async function workers(req: IncomingMessage, res: ServerResponse, q: Record<string, string>): Promise<void> {
    const data = await readWorkersPage(set)
    const shape = shapeOf(data.presence.rows.map((r) => `${r.queue}:${r.name}:${r.connections > 0}`))
    const out = workersPage({ ...view(noticeOf(q)), banner: healthBanner(data.health) }, data, shape)
    if (acceptsJson(req)) return sendJson(res, 200, out.live.json())
    sendHtml(res, 200, out.html)
  }

  async function post(req: IncomingMessage, res: ServerResponse, name: string, id: string | undefined): Promise<void> {
    if (settings.readOnly) throw new DashboardError('ERR_UI_READ_ONLY', 'this dashboard is read-only: it takes no action')
    const form = await readForm(req, ['token', 'action', 'confirm', 'back', 'state'])
    if (form.token === undefined || !sameSecret(form.token, token)) {
      throw new DashboardError('ERR_UI_TOKEN', "refused: the request does not carry this page's token (reload the page and try again)")
    }
    if (form.action === undefined) throw new DashboardError('ERR_UI_INPUT', 'form field "action" is missing')
    const back =
      form.back === undefined ? (id === undefined ? 'queue' : 'job') : oneOf('back', form.back, ['overview', 'queue', 'job'] as const)
    const state = form.state === undefined ? undefined : oneOf('state', form.state, LISTED_STATES)
    if (form.confirm !== undefined && form.confirm !== 'yes')
      throw new DashboardError('ERR_UI_INPUT', 'form field "confirm" takes only "yes"')
    const queue = await set.get(name)
    let outcome: Outcome
    let to: string
    const base = settings.basePath
    if (id === undefined) {
      const action = oneOf('action', form.action, QUEUE_ACTIONS)
      outcome = await queueAction(queue, action, form.confirm === 'yes')
      to = back === 'overview' ? `${base}/` : `${queuePath(base, name)}${state ? `?state=${state}` : ''}`
      if ('confirm' in outcome) {
        const cancel =
          back === 'overview' ? `${base}/` : `${queuePath(base, name)}?state=${action === 'clean-completed' ? 'completed' : 'failed'}`
        const crumbs = [{ label: name, href: queuePath(base, name) }, { label: 'confirm' }]
        const page = confirmPage(
          view(),
          await serverTimeMs(set.client),
          { path: queuePath(base, name), action, back: cancel, crumbs },
          outcome.confirm.question,
          outcome.confirm.button,
        )
        return sendHtml(res, 200, page)
      }
      if (action === 'retry-all' || action === 'clean-failed') to = `${queuePath(base, name)}?state=failed`
      if (action === 'clean-completed') to = `${queuePath(base, name)}?state=completed`
    } else {
      const action = oneOf('action', form.action, JOB_ACTIONS)
      outcome = await jobAction(queue, id, action)
      to = back === 'job' && action !== 'remove' ? jobPath(base, name, id) : `${queuePath(base, name)}${state ? `?state=${state}` : ''}`
    }
    if ('confirm' in outcome) throw new DashboardError('ERR_UI_INPUT', 'nothing to confirm')
    redirect(res, `${to}${to.includes('?') ? '&' : '?'}done=${outcome.done}${outcome.n > 0 ? `&n=${outcome.n}` : ''}`)
  }

  function fail(req: IncomingMessage, res: ServerResponse, err: unknown): void {
    // A plain command's failure (a read outside a Queue's calls) gets the library's code: ERR_CONNECTION...
    const known = err instanceof DashboardError || err instanceof EchoMQError
    const { status, code, message } = describeFailure(
      known ? err : redisError(where ?? 'given', 'Redis', err, lastConnectionError(conn.client)),
    )
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
    const shown = status === 401 || code === 'ERR_UI_HOST' ? { ...view(), where: undefined } : view()
    sendHtml(res, status, errorPage(shown, Date.now(), status, code, message))
  }

  return Object.assign(handler, {
    close(): Promise<void> {
      closing ??= set.close().then(() => closeConnection(conn))
      return closing
    },
  })
}

export type { DashboardOptions }
