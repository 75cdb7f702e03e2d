/**
 * The dashboard's GET pages, each read then drawn: as HTML, or as the page's live values when the request
 * accepts JSON (layout.ts). `Dashboard` is what one handler (handler.ts) holds for all of them.
 */
import { createHash } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { JobState } from '../job.js'
import { validateJobId } from '../options.js'
import { DONE_CODES, notice } from './actions.js'
import { DashboardError } from './errors.js'
import type { Html } from './html.js'
import { acceptsJson, oneOf, pageNumber, redirect, sendHtml, sendJson } from './http.js'
import { jobPage } from './job-page.js'
import { readHealth } from './operator.js'
import { healthBanner, timingPage, workersPage } from './operator-page.js'
import type { DashboardSettings } from './options.js'
import { jobPath, overviewPage, queuePage, queuePath, type View } from './pages.js'
import { LISTED_STATES, type QueueSet, readJobPage, readOverview, readQueuePage, readTimingPage, readWorkersPage } from './read.js'

/** One dashboard handler's state, shared by its pages and its actions. */
export interface Dashboard {
  settings: DashboardSettings
  set: QueueSet
  /** The random value every form of this handler carries (post.ts checks it). */
  token: string
  view(notice?: string): View
}

type Query = Record<string, string>

/** Queues on one overview page. */
const OVERVIEW_PAGE = 500
/** Log lines on one job page. */
const LOG_PAGE = 100

const shapeOf = (parts: string[]) => createHash('sha1').update(parts.join('\n')).digest('hex').slice(0, 12)

function noticeOf(q: Query): string | undefined {
  if (q.done === undefined) {
    if (q.n !== undefined) throw new DashboardError('ERR_UI_INPUT', 'query parameter "n" goes with "done"')
    return undefined
  }
  const done = oneOf('done', q.done, DONE_CODES)
  if (q.n !== undefined && !/^\d{1,9}$/.test(q.n)) throw new DashboardError('ERR_UI_INPUT', 'expected n to be a count from 0')
  return notice(done, Number(q.n ?? 0))
}

/**
 * The red banner while Redis may evict keys; none when INFO cannot be read (the workers page says why).
 * A live refresh (JSON) carries no banner, so it asks Redis nothing for one.
 */
export async function bannerNow(d: Dashboard, req?: IncomingMessage): Promise<Html | undefined> {
  if (req !== undefined && acceptsJson(req)) return undefined
  try {
    return healthBanner(await readHealth(d.set))
  } catch {
    return undefined
  }
}

function answer(req: IncomingMessage, res: ServerResponse, out: { html: string; live: { json(): unknown } }): void {
  if (acceptsJson(req)) sendJson(res, 200, out.live.json())
  else sendHtml(res, 200, out.html)
}

export async function overview(d: Dashboard, req: IncomingMessage, res: ServerResponse, q: Query): Promise<void> {
  const pageNo = pageNumber('page', q.page)
  const start = (pageNo - 1) * OVERVIEW_PAGE
  const [data, banner] = await Promise.all([readOverview(d.set, start, OVERVIEW_PAGE), bannerNow(d, req)])
  const shape = shapeOf(data.rows.map((r) => `${r.name}:${r.paused}`))
  answer(req, res, overviewPage({ ...d.view(noticeOf(q)), banner }, data, start, OVERVIEW_PAGE, shape))
}

export async function queueScreen(d: Dashboard, req: IncomingMessage, res: ServerResponse, name: string, q: Query): Promise<void> {
  if (q.id !== undefined) {
    if (Object.keys(q).length > 1) throw new DashboardError('ERR_UI_INPUT', 'query parameter "id" goes alone')
    return redirect(res, jobPath(d.settings.basePath, name, validateJobId(q.id.trim())))
  }
  const state: JobState = q.state === undefined ? 'active' : oneOf('state', q.state, LISTED_STATES)
  const pageNo = pageNumber('page', q.page)
  const start = (pageNo - 1) * d.settings.pageSize
  const [data, banner] = await Promise.all([readQueuePage(d.set, name, state, start, d.settings.pageSize), bannerNow(d, req)])
  const shape = shapeOf([String(data.paused), String(data.workers === 0), ...data.jobs.map((j) => j.id)])
  answer(req, res, queuePage({ ...d.view(noticeOf(q)), banner }, data, shape))
}

export async function jobScreen(
  d: Dashboard,
  req: IncomingMessage,
  res: ServerResponse,
  name: string,
  id: string,
  q: Query,
): Promise<void> {
  const logStart = (pageNumber('logs', q.logs) - 1) * LOG_PAGE
  const [data, banner] = await Promise.all([readJobPage(d.set, name, id, logStart, LOG_PAGE), bannerNow(d, req)])
  answer(req, res, jobPage({ ...d.view(noticeOf(q)), banner }, data, LOG_PAGE))
}

export async function timingScreen(d: Dashboard, res: ServerResponse, name: string, q: Query): Promise<void> {
  const [data, banner] = await Promise.all([readTimingPage(d.set, name), bannerNow(d)])
  sendHtml(res, 200, timingPage({ ...d.view(noticeOf(q)), banner }, data, queuePath(d.settings.basePath, name)))
}

export async function workersScreen(d: Dashboard, req: IncomingMessage, res: ServerResponse, q: Query): Promise<void> {
  const data = await readWorkersPage(d.set)
  const shape = shapeOf(data.presence.rows.map((r) => `${r.queue}:${r.name}:${r.connections > 0}`))
  answer(req, res, workersPage({ ...d.view(noticeOf(q)), banner: healthBanner(data.health) }, data, shape))
}
