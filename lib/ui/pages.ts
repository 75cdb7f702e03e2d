/**
 * The pages, rendered from what read.ts read: the overview (every queue, its counts, paused or not), a
 * queue (its jobs by state, a page at a time; in-flight jobs grouped by worker with their leases; delayed
 * jobs and schedules), a confirmation and an error page; a job's page is job-page.ts. Every value
 * from Redis goes through the `html` template (escaped); actions are forms posting the page's token,
 * left out in read-only mode.
 */
import type { Job, JobState } from '../job.js'
import { LIST_ORDER, WAIT_REVERSED } from '../read-model.js'
import { chart } from './chart.js'
import { count, pretty, span } from './format.js'
import { type Html, html, query } from './html.js'
import { actionForm, Live, page, shell } from './layout.js'
import { queueOperations, workersCell } from './operator-page.js'
import type { Lease, Overview, QueuePage, QueueRow } from './read.js'
import { LISTED_STATES, listedCount } from './read.js'
import { renderSchedules } from './schedules.js'

/** What every page needs besides its data. */
export interface View {
  base: string
  token: string
  readOnly: boolean
  where: string | undefined
  refreshMs: number
  graceMs: number
  pageSize: number
  /** A message after an action (from the redirect's query), shown once. */
  notice: string | undefined
  /** The red banner of a Redis that may evict keys (operator-page.ts), on every page. */
  banner?: Html | undefined
}

export const queuePath = (base: string, name: string) => `${base}/queues/${encodeURIComponent(name)}`
export const jobPath = (base: string, name: string, id: string) => `${queuePath(base, name)}/jobs/${encodeURIComponent(id)}`

const STATE_LABEL: Record<JobState, string> = {
  active: 'In flight',
  wait: 'Waiting',
  prioritized: 'Prioritized',
  delayed: 'Delayed',
  failed: 'Failed',
  completed: 'Completed',
}
/** How each tab is ordered, in the words `echomq jobs` uses for the same list (lib/read-model.ts). */
const STATE_ORDER: Record<JobState, string> = { ...LIST_ORDER, wait: WAIT_REVERSED }

/** One line of a long text, for a table cell. */
export const oneLine = (text: string | undefined, max = 120) => {
  const flat = (text ?? '').replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

function pager(view: View, path: string, params: Record<string, string>, start: number, shown: number, total: number): Html {
  if (total === 0) return html``
  const pageNo = Math.floor(start / view.pageSize) + 1
  const last = Math.max(1, Math.ceil(total / view.pageSize))
  const link = (n: number, label: string, rel: string) =>
    html`<a href="${path}${query({ ...params, page: n > 1 ? n : undefined })}" rel="${rel}">${label}</a>`
  return html`<nav class="pager" aria-label="Pages">
${pageNo > 1 ? link(1, '« First', 'first') : ''} ${pageNo > 1 ? link(pageNo - 1, '‹ Previous', 'prev') : ''}
<span>${shown === 0 ? 'none' : `${count(start + 1)}–${count(start + shown)}`} of ${count(total)} (page ${count(pageNo)} of ${count(last)})</span>
${pageNo < last ? link(pageNo + 1, 'Next ›', 'next') : ''} ${pageNo < last ? link(last, 'Last »', 'last') : ''}
</nav>`
}

/** A form to pause or resume a queue. */
const pauseForm = (view: View, path: string, paused: boolean, label: string, fields: Record<string, string>) =>
  actionForm(path, view.token, paused ? 'resume' : 'pause', label, fields)

/** A job's action in a list row, coming back to the list; none in read-only mode. */
function rowAction(view: View, queue: string, job: Job, action: 'retry' | 'promote', label: string): Html {
  if (view.readOnly) return html``
  const state = action === 'retry' ? 'failed' : 'delayed'
  return html`<td>${actionForm(jobPath(view.base, queue, job.id), view.token, action, label, { back: 'queue', state })}</td>`
}

// ---- the overview ------------------------------------------------------------------------------------

const COUNT_COLUMNS = [
  ['wait', 'Waiting'],
  ['prioritized', 'Prioritized'],
  ['active', 'In flight'],
  ['stalled', 'Marked stalled'],
  ['delayed', 'Delayed'],
  ['failed', 'Failed'],
  ['completed', 'Completed'],
] as const

export function overviewPage(view: View, o: Overview, start: number, pageSize: number, shape: string): { html: string; live: Live } {
  const live = new Live(o.now)
  live.shape = shape
  live.chart = o.chart
  const row = (r: QueueRow) => {
    const path = queuePath(view.base, r.name)
    const cell = (key: string, state: string | undefined, n: number) => {
      const value = live.value(`${r.name}|${key}`, count(n))
      return html`<td class="num">${state ? html`<a href="${path}${query({ state })}">${value}</a>` : value}</td>`
    }
    return html`<tr>
<th scope="row"><a href="${path}">${r.name}</a></th>
<td>${live.value(`${r.name}|paused`, r.paused ? 'paused' : 'running', r.paused ? 'badge warn' : 'badge')}</td>
${COUNT_COLUMNS.map(([key]) => cell(key, key === 'stalled' ? 'active' : key, key === 'stalled' ? r.counts.stalled : listedCount(r.counts, key)))}
${workersCell(live, r.name, r.workers, r.counts)}
${view.readOnly ? '' : html`<td>${pauseForm(view, path, r.paused, r.paused ? 'Resume' : 'Pause', { back: 'overview' })}</td>`}
</tr>`
  }
  const main = html`<h1>Queues</h1>
${chart(o.chart, 'All queues shown')}
${
  o.rows.length === 0
    ? html`<p class="empty">No queues yet: a queue appears here once a Queue or Worker has used it.</p>`
    : html`<div class="scroll"><table class="queues">
<caption>Jobs per queue; a count links to those jobs</caption>
<thead><tr><th scope="col">Queue</th><th scope="col">State</th>
${COUNT_COLUMNS.map(([, label]) => html`<th scope="col" class="num">${label}</th>`)}<th scope="col" class="num">Workers</th>
${view.readOnly ? '' : html`<th scope="col">Action</th>`}</tr></thead>
<tbody>${o.rows.map(row)}</tbody></table></div>`
}
${o.total > pageSize ? pager({ ...view, pageSize }, `${view.base}/`, {}, start, o.rows.length, o.total) : ''}`
  return { html: page(shell(view, live, 'Queues', []), main), live }
}

// ---- a queue -----------------------------------------------------------------------------------------

function jobLink(view: View, name: string, job: Job) {
  return html`<a href="${jobPath(view.base, name, job.id)}"><code>${job.id}</code></a>`
}

const attemptsOf = (job: Job) => `${job.attemptsMade}/${job.attempts}`

function jobTable(view: View, p: QueuePage, live: Live): Html {
  const { state } = p
  const columns: Record<Exclude<JobState, 'active'>, [string[], (j: Job) => Html]> = {
    wait: [
      ['Added', 'Attempts', 'Last error'],
      (j) => html`<td>${live.fixedTime(j.createdOn)}</td><td>${attemptsOf(j)}</td><td>${oneLine(j.lastError)}</td>`,
    ],
    prioritized: [
      ['Priority', 'Added', 'Attempts', 'Last error'],
      (j) => html`<td>${j.priority ?? ''}</td><td>${live.fixedTime(j.createdOn)}</td><td>${attemptsOf(j)}</td>
<td>${oneLine(j.lastError)}</td>`,
    ],
    delayed: [
      ['Due', 'Attempts', 'Last error', ...(view.readOnly ? [] : ['Action'])],
      (j) => html`<td>${j.dueAt === undefined ? '' : live.time(`due|${j.id}`, j.dueAt)}</td><td>${attemptsOf(j)}</td>
<td>${oneLine(j.lastError)}</td>${rowAction(view, p.name, j, 'promote', 'Promote')}`,
    ],
    failed: [
      ['Failed', 'Attempts', 'Worker', 'Reason', ...(view.readOnly ? [] : ['Action'])],
      (j) => html`<td>${j.finishedOn === undefined ? '' : live.fixedTime(j.finishedOn)}</td><td>${attemptsOf(j)}</td>
<td>${j.workerName ?? ''}</td><td class="reason">${oneLine(j.failedReason)}</td>
${rowAction(view, p.name, j, 'retry', 'Retry')}`,
    ],
    completed: [
      ['Completed', 'Attempts', 'Worker', 'Result'],
      (j) => html`<td>${j.finishedOn === undefined ? '' : live.fixedTime(j.finishedOn)}</td><td>${attemptsOf(j)}</td>
<td>${j.workerName ?? ''}</td><td>${oneLine(pretty(j.returnValue), 80)}</td>`,
    ],
  }
  if (state === 'active') return activeByWorker(view, p, live)
  const [headers, cells] = columns[state]
  return html`<table class="jobs"><caption>${STATE_LABEL[state]} jobs, ${STATE_ORDER[state]}</caption>
<thead><tr><th scope="col">Job</th><th scope="col">Name</th>${headers.map((h) => html`<th scope="col">${h}</th>`)}</tr></thead>
<tbody>${p.jobs.map((j) => html`<tr><th scope="row">${jobLink(view, p.name, j)}</th><td>${j.name}</td>${cells(j)}</tr>`)}</tbody>
</table>${p.jobs.length === 0 ? html`<p class="empty">No ${STATE_LABEL[state].toLowerCase()} jobs${p.start > 0 ? ' on this page' : ''}.</p>` : ''}`
}

/** A lease as words: time left, or lapsed, with the sweep's mark and when it recovers the job. */
export function leaseCell(view: View, key: string, lease: Lease | undefined, now: number, live: Live): Html {
  if (!lease) return html``
  const left =
    lease.msLeft === undefined ? live.value(`lease|${key}`, 'lapsed', 'badge warn') : live.time(`lease|${key}`, now + lease.msLeft, 'lease')
  if (lease.markedAt === undefined) return left
  const due = lease.markedAt + view.graceMs
  return html`${left}; <span class="badge warn">marked</span> ${live.time(`mark|${key}`, lease.markedAt)},
recovered by the first sweep ${due > now ? html`after ${live.time(`recover|${key}`, due)}` : 'from now on'}`
}

/**
 * In-flight jobs grouped by the worker holding them (workerName), the group with the earliest lease
 * deadline first: a worker that stopped renewing (a dying host) has the lapsed leases, so it leads.
 */
function activeByWorker(view: View, p: QueuePage, live: Live): Html {
  const groups = new Map<string, { job: Job; lease: Lease | undefined }[]>()
  p.jobs.forEach((job, i) => {
    const worker = job.workerName ?? '(unknown worker)'
    const list = groups.get(worker) ?? []
    list.push({ job, lease: p.leases[i] })
    groups.set(worker, list)
  })
  if (groups.size === 0) return html`<p class="empty">No jobs in flight${p.start > 0 ? ' on this page' : ''}.</p>`
  return html`<p class="hint">Grouped by the worker holding them, ${STATE_ORDER.active}. A lease that lapsed is marked by the
next sweep and recovered by the first sweep at least ${span(view.graceMs)} after the mark.</p>
${[...groups].map(([worker, list]) => {
  const lapsed = list.filter((e) => e.lease?.msLeft === undefined).length
  const marked = list.filter((e) => e.lease?.markedAt !== undefined).length
  return html`<section class="worker${lapsed === list.length ? ' dying' : ''}">
<h3>Worker <code>${worker}</code>: ${count(list.length)} job${list.length === 1 ? '' : 's'}${
    lapsed > 0 ? html` <span class="badge warn">${count(lapsed)} lease${lapsed === 1 ? '' : 's'} lapsed</span>` : ''
  }${marked > 0 ? html` <span class="badge warn">${count(marked)} marked</span>` : ''}</h3>
<table class="jobs"><thead><tr><th scope="col">Job</th><th scope="col">Name</th><th scope="col">Started</th><th scope="col">Lease</th>
<th scope="col">Attempts</th><th scope="col">Progress</th></tr></thead>
<tbody>${list.map(
    ({ job, lease }) => html`<tr><th scope="row">${jobLink(view, p.name, job)}</th><td>${job.name}</td>
<td>${job.startedOn === undefined ? '' : live.fixedTime(job.startedOn)}</td><td>${leaseCell(view, job.id, lease, p.now, live)}</td>
<td>${attemptsOf(job)}</td><td>${oneLine(pretty(job.progress), 40)}</td></tr>`,
  )}</tbody></table></section>`
})}`
}

function bulkActions(view: View, p: QueuePage): Html {
  if (view.readOnly) return html``
  const path = queuePath(view.base, p.name)
  if (p.state === 'failed' && p.counts.failed > 0) {
    return html`<p class="actions">${actionForm(path, view.token, 'retry-all', `Retry all ${count(p.counts.failed)} failed…`)}
${actionForm(path, view.token, 'clean-failed', `Remove all ${count(p.counts.failed)} failed…`, {}, 'danger')}</p>`
  }
  if (p.state === 'completed' && p.counts.completed > 0) {
    const label = `Remove all ${count(p.counts.completed)} completed…`
    return html`<p class="actions">${actionForm(path, view.token, 'clean-completed', label, {}, 'danger')}</p>`
  }
  return html``
}

export function queuePage(view: View, p: QueuePage, shape: string): { html: string; live: Live } {
  const live = new Live(p.now)
  live.shape = shape
  live.chart = p.chart
  const path = queuePath(view.base, p.name)
  const tabs = LISTED_STATES.map((s) => {
    const n = live.value(`count|${s}`, count(listedCount(p.counts, s)))
    return s === p.state
      ? html`<li><a href="${path}${query({ state: s })}" aria-current="page">${STATE_LABEL[s]} ${n}</a></li>`
      : html`<li><a href="${path}${query({ state: s })}">${STATE_LABEL[s]} ${n}</a></li>`
  })
  const extra = html`Marked stalled: ${live.value('count|stalled', count(p.counts.stalled))}`
  const total = listedCount(p.counts, p.state)
  const main = html`<h1>Queue <code>${p.name}</code> ${live.value('paused', p.paused ? 'paused' : 'running', p.paused ? 'badge warn' : 'badge')}</h1>
${
  view.readOnly
    ? ''
    : html`<p class="actions">${actionForm(
        path,
        view.token,
        p.paused ? 'resume' : 'pause',
        p.paused ? 'Resume the queue' : 'Pause the queue',
        {
          back: 'queue',
          state: p.state,
        },
      )}</p>`
}
<form class="search" role="search" method="get" action="${path}"><label for="find">Find a job by id</label>
<input id="find" name="id" required maxlength="128" pattern="[A-Za-z0-9._\\-]+" autocomplete="off"><button type="submit">Find</button></form>
${chart(p.chart, `Queue ${p.name}`)}
${queueOperations(live, p.workers, p.counts, `${path}/timing`)}
<nav class="tabs" aria-label="Job states"><ul>${tabs}</ul></nav>
<p class="hint">${extra}</p>
<section aria-labelledby="list-title"><h2 id="list-title">${STATE_LABEL[p.state]} jobs</h2>
${bulkActions(view, p)}
${jobTable(view, p, live)}
${pager(view, path, { state: p.state }, p.start, p.jobs.length, total)}
</section>
${
  p.state === 'delayed' && p.schedulers !== undefined
    ? html`<section aria-labelledby="schedules-title"><h2 id="schedules-title">Schedules</h2>
${renderSchedules(p.schedulers, live)}</section>`
    : ''
}`
  return { html: page(shell(view, live, `${p.name}: ${STATE_LABEL[p.state].toLowerCase()}`, [{ label: p.name }]), main), live }
}

// ---- confirmation and errors -------------------------------------------------------------------------

export function confirmPage(
  view: View,
  now: number,
  target: { path: string; action: string; back: string; crumbs: { label: string; href?: string }[] },
  question: string,
  button: string,
): string {
  const live = new Live(now)
  const main = html`<h1>Please confirm</h1><p class="lead">${question}</p>
<p class="actions">${actionForm(target.path, view.token, target.action, button, { confirm: 'yes' }, 'danger')}
<a class="button" href="${target.back}">Cancel</a></p>`
  // Not refreshed: the page's address is the form's, not a page of its own.
  return page(shell({ ...view, refreshMs: 0 }, live, 'Confirm', target.crumbs), main)
}

export function errorPage(view: View, now: number, status: number, code: string, message: string): string {
  const live = new Live(now)
  const main = html`<h1>${status === 404 ? 'Not found' : status < 500 ? 'Refused' : 'Something failed'}</h1>
<p class="lead"><code>${code}</code>: ${message}</p><p><a href="${view.base}/">Back to the queues</a></p>`
  return page(shell({ ...view, refreshMs: 0 }, live, 'Error', []), main)
}
