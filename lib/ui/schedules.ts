/**
 * The schedules part of a queue's delayed page: its job schedulers (queue.getJobSchedulers, BullMQ's
 * shape), each with what it repeats, when it next adds a job, its limit and its template.
 */
import type { JobScheduler } from '../schedulers/schedulers.js'
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

/** The schedulers, kept to the fields shown. */
export function schedulerViews(list: JobScheduler[]): JobSchedulerView[] {
  return list.map((s) => {
    const view: JobSchedulerView = { key: s.key, name: s.name, next: s.next }
    if (s.pattern !== undefined) view.pattern = s.pattern
    if (s.every !== undefined) view.every = s.every
    if (s.tz !== undefined) view.tz = s.tz
    if (s.limit !== undefined) view.limit = s.limit
    if (s.template !== undefined) view.template = s.template
    return view
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
