/**
 * A job's page: everything kept about it (state, attempts, progress, times, its lease while in flight,
 * errors and stacks, data, options, return value, logs a page at a time), and the actions its state allows.
 * Every value from Redis goes through the `html` template (escaped).
 */
import type { Job } from '../job.js'
import { count, pretty } from './format.js'
import { type Html, html, query } from './html.js'
import { actionForm, Live, page, shell } from './layout.js'
import { jobPath, leaseCell, oneLine, queuePath, type View } from './pages.js'
import type { JobPage } from './read.js'

function row(label: string, value: Html | string | number | undefined) {
  return value === undefined || value === '' ? html`` : html`<dt>${label}</dt><dd>${value}</dd>`
}

function progressOf(progress: unknown): Html | string {
  if (progress === 0) return 'none reported'
  if (typeof progress === 'number' && progress >= 0 && progress <= 100) {
    return html`<progress max="100" value="${progress}">${progress}%</progress> ${progress}%`
  }
  return html`<code>${oneLine(pretty(progress), 200)}</code>`
}

function jobActions(view: View, p: JobPage): Html {
  if (view.readOnly) return html``
  const path = jobPath(view.base, p.name, p.job.id)
  const { state } = p.job
  return html`<p class="actions">
${state === 'failed' ? actionForm(path, view.token, 'retry', 'Retry') : ''}
${state === 'delayed' ? actionForm(path, view.token, 'promote', 'Promote: run now') : ''}
${state === 'active' ? '' : actionForm(path, view.token, 'remove', 'Remove', {}, 'danger')}
</p>`
}

/**
 * A job's errors: the last one, the one before a retry, and the stack of each failed run, newest first. A job
 * back in line holds its retried attempt's reason as failedReason too (BullMQ's): shown once, as lastError.
 */
function errorsOf(job: Job): Html {
  const stacks = job.stacktrace
  if (!job.failedReason && !job.lastError && stacks.length === 0) return html``
  const runs = stacks.map((s, i) => ({ s, n: stacks.length - i })).reverse()
  return html`<section aria-labelledby="errors-title"><h2 id="errors-title">Errors</h2>
${job.failedReason && job.state === 'failed' ? html`<h3>Failed with</h3><pre class="error">${job.failedReason}</pre>` : ''}
${job.lastError ? html`<h3>Last error before a retry</h3><pre class="error">${job.lastError}</pre>` : ''}
${runs.map(({ s, n }) => html`<h3>Failed run ${n === stacks.length ? `${n} (the last)` : n} of those kept</h3><pre class="error">${s}</pre>`)}
</section>`
}

export function jobPage(view: View, p: JobPage, logSize: number): { html: string; live: Live } {
  const live = new Live(p.now)
  const { job } = p
  live.shape = job.state
  const queue = queuePath(view.base, p.name)
  const lease =
    job.state === 'active'
      ? html`<section aria-labelledby="lease-title"><h2 id="lease-title">Lease</h2><dl>
${row('Held by worker', job.workerName ?? '(unknown)')}
${row('Lease', leaseCell(view, job.id, p.lease, p.now, live))}
${p.lease?.markedAt === undefined && p.lease?.msLeft === undefined ? row('Sweep', 'not marked yet: the next sweep marks it') : ''}
</dl></section>`
      : html``
  const logs = p.logs
  const main = html`<h1>Job <code>${job.id}</code></h1>
<p class="lead"><strong>${job.name}</strong> in queue <a href="${queue}">${p.name}</a>:
${live.value('state', job.state, `badge state-${job.state}`)}</p>
${jobActions(view, p)}
<dl class="facts">
${row(
  'Attempts',
  html`${live.value('attempts', `${job.attemptsMade} of ${job.attempts}`)} used (runs started: ${job.attemptsStarted}${
    job.retried ? `; retried from failed ${job.retried} time${job.retried === 1 ? '' : 's'}` : ''
  })`,
)}
${row('Progress', progressOf(job.progress))}
${row('Created', live.fixedTime(job.createdOn))}
${row('Started', job.startedOn === undefined ? undefined : live.fixedTime(job.startedOn))}
${row('Finished', job.finishedOn === undefined ? undefined : live.fixedTime(job.finishedOn))}
${row('Due', job.dueAt === undefined ? undefined : live.time('due', job.dueAt))}
${row('Worker', job.workerName)}
</dl>
${lease}
${errorsOf(job)}
<section aria-labelledby="data-title"><h2 id="data-title">Data</h2><pre>${pretty(job.data)}</pre></section>
${job.opts ? html`<section aria-labelledby="opts-title"><h2 id="opts-title">Options</h2><pre>${pretty(job.opts)}</pre></section>` : ''}
${
  job.returnValue === undefined
    ? ''
    : html`<section aria-labelledby="result-title"><h2 id="result-title">Return value</h2><pre>${pretty(job.returnValue)}</pre></section>`
}
<section aria-labelledby="logs-title"><h2 id="logs-title">Logs</h2>
${
  logs.count === 0
    ? html`<p class="empty">No log lines.</p>`
    : html`<p class="hint">${count(logs.count)} line${logs.count === 1 ? '' : 's'}, newest first.</p>
<ol class="logs" reversed start="${logs.count - p.logStart}">${logs.logs.map((l) => html`<li><pre>${l}</pre></li>`)}</ol>
${logPager(view, p, logSize)}`
}
</section>`
  return { html: page(shell(view, live, `job ${job.id}`, [{ label: p.name, href: queue }, { label: job.id }]), main), live }
}

function logPager(view: View, p: JobPage, logSize: number): Html {
  const path = jobPath(view.base, p.name, p.job.id)
  const pageNo = Math.floor(p.logStart / logSize) + 1
  const last = Math.max(1, Math.ceil(p.logs.count / logSize))
  if (last === 1) return html``
  return html`<nav class="pager" aria-label="Log pages">
${pageNo > 1 ? html`<a href="${path}${query({ logs: pageNo - 1 > 1 ? pageNo - 1 : undefined })}" rel="prev">‹ Newer</a>` : ''}
<span>page ${count(pageNo)} of ${count(last)}</span>
${pageNo < last ? html`<a href="${path}${query({ logs: pageNo + 1 })}" rel="next">Older ›</a>` : ''}</nav>`
}
