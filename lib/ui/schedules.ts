/**
 * The schedules part of a queue's delayed page: a list of job schedulers in BullMQ's shape
 * ({ key, name, next, pattern | every, tz, limit, template }). It renders whatever it is given; the reader
 * (read.ts) asks the Queue for them only when the Queue has `getJobSchedulers` (job schedulers are being
 * added to the library separately), so this part lights up when they land and shows nothing until then.
 */
import { count, pretty } from './format.js'
import { type Html, html } from './html.js'
import type { Live } from './layout.js'

export interface JobSchedulerView {
  key: string
  name?: string
  /** When it next adds a job (ms). */
  next?: number
  pattern?: string
  /** ms between jobs. */
  every?: number
  tz?: string
  limit?: number
  /** What each job is made of: { data, opts }. */
  template?: unknown
}

/** The schedulers a Queue returns, kept to the fields shown (anything else is ignored, nothing is trusted to be there). */
export function schedulerViews(list: unknown): JobSchedulerView[] {
  if (!Array.isArray(list)) return []
  return list.flatMap((s): JobSchedulerView[] => {
    if (s === null || typeof s !== 'object') return []
    const o = s as Record<string, unknown>
    if (typeof o.key !== 'string' && typeof o.id !== 'string') return []
    const num = (v: unknown) =>
      typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : undefined
    const view: JobSchedulerView = { key: String(o.key ?? o.id) }
    if (typeof o.name === 'string') view.name = o.name
    const next = num(o.next)
    if (next !== undefined) view.next = next
    if (typeof o.pattern === 'string') view.pattern = o.pattern
    const every = num(o.every)
    if (every !== undefined) view.every = every
    if (typeof o.tz === 'string') view.tz = o.tz
    const limit = num(o.limit)
    if (limit !== undefined) view.limit = limit
    if (o.template !== undefined) view.template = o.template
    return [view]
  })
}

function repeats(s: JobSchedulerView): Html | string {
  if (s.pattern !== undefined) return html`cron <code>${s.pattern}</code>${s.tz ? html` (${s.tz})` : ''}`
  return s.every === undefined ? '' : `every ${count(s.every)} ms`
}

export function renderSchedules(schedulers: JobSchedulerView[], live: Live): Html {
  if (schedulers.length === 0) return html`<p class="empty">No job schedulers.</p>`
  return html`<table class="jobs">
<thead><tr><th scope="col">Scheduler</th><th scope="col">Job name</th><th scope="col">Repeats</th><th scope="col">Next job</th>
<th scope="col">Limit</th><th scope="col">Template</th></tr></thead>
<tbody>${schedulers.map(
    (s, i) => html`<tr>
<td><code>${s.key}</code></td><td>${s.name ?? ''}</td>
<td>${repeats(s)}</td>
<td>${s.next !== undefined ? live.time(`scheduler-${i}`, s.next) : ''}</td>
<td>${s.limit !== undefined ? count(s.limit) : ''}</td>
<td>${s.template !== undefined ? html`<details><summary>template</summary><pre>${pretty(s.template)}</pre></details>` : ''}</td>
</tr>`,
  )}</tbody></table>`
}
