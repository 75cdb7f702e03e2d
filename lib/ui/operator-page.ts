/**
 * The operator view's markup: the red banner of a Redis that may evict keys (on every page), the
 * workers page (every worker of the queues shown, Redis's health), the overview's Workers column and
 * the queue page's flag and timing. Values from Redis go through the `html` template (escaped).
 */
import type { QueueCounts } from '../job.js'
import { count } from './format.js'
import { type Html, html } from './html.js'
import { Live, page, shell } from './layout.js'
import { evicting, type Presence, type RedisHealth, type WorkerRow } from './operator.js'
import type { View } from './pages.js'
import { renderTiming, type Timing } from './timing.js'

const bytes = (n: number | undefined): string => {
  if (n === undefined) return 'not reported'
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v.toFixed(1)} ${units[i]}`
}

/** Shown on every page while a primary's maxmemory-policy is not noeviction. */
export function healthBanner(h: RedisHealth | undefined): Html | undefined {
  if (!h) return undefined
  const bad = evicting(h)
  if (bad.length === 0) return undefined
  const policies = [...new Set(bad.map((n) => n.policy))].join(', ')
  return html`<div class="banner danger" role="alert" data-banner="maxmemory-policy"><strong>Redis may delete EchoMQ's keys:</strong>
maxmemory-policy is <code>${policies}</code>${h.nodes.length > 1 ? html` on ${count(bad.length)} of ${count(h.nodes.length)} primaries` : ''}, not
<code>noeviction</code>. Under memory pressure Redis evicts keys: a lease (its job then runs twice), a job, a queue's sets.
Set <code>maxmemory-policy noeviction</code> (ElastiCache: in the parameter group).${
    bad.every((n) => n.maxmemory === 0) ? ' (maxmemory is not set now, so nothing is evicted yet; a limit set later would.)' : ''
  }</div>`
}

/** Ready jobs: waiting with or without a priority. */
const readyOf = (c: QueueCounts): number => c.wait + c.prioritized

/** The overview's Workers cell: how many are connected; "none" in red while jobs are ready. */
export function workersCell(live: Live, queue: string, connected: number | undefined, counts: QueueCounts): Html {
  if (connected === undefined) {
    return html`<td class="num" title="CLIENT LIST is refused by this Redis: see the Workers page">${live.value(`${queue}|workers`, '?')}</td>`
  }
  const none = connected === 0 && readyOf(counts) > 0
  return html`<td class="num">${live.value(`${queue}|workers`, none ? 'none' : count(connected), none ? 'badge danger' : '')}</td>`
}

/** The queue page's flag (ready jobs, no worker), its workers, a link to its wait and processing time. */
export function queueOperations(live: Live, connected: number | undefined, counts: QueueCounts, timingPath: string): Html {
  const ready = readyOf(counts)
  const flag =
    connected === 0 && ready > 0
      ? html`<p class="banner danger" role="alert" data-flag="no-worker"><strong>No worker:</strong> ${count(ready)}
job${ready === 1 ? ' is' : 's are'} ready and no worker of this queue is connected.</p>`
      : ''
  const workers = connected === undefined ? 'unknown (CLIENT LIST is refused by this Redis)' : live.value('workers', count(connected))
  return html`${flag}<p class="hint">Workers connected: ${workers} · <a href="${timingPath}">Wait and processing time per minute</a></p>`
}

function workerRow(r: WorkerRow, live: Live, i: number): Html {
  const gone = r.connections === 0
  const live_ = r.inFlight - r.lapsed
  return html`<tr${gone ? html` class="gone"` : ''}><td>${r.queue}</td><th scope="row"><code>${r.name}</code></th>
<td>${r.hosts.join(', ')}</td><td class="num">${count(r.connections)}</td>
<td class="num">${count(r.inFlight)}${r.lapsed > 0 ? html` <span class="badge warn">${count(r.lapsed)} lapsed</span>` : ''}</td>
<td>${
    r.lastSeen !== undefined
      ? html`${live.time(`seen|${i}`, r.lastSeen)}${live_ > 0 ? html` · renewing ${count(live_)} lease${live_ === 1 ? '' : 's'}` : ''}`
      : live_ > 0
        ? 'renewing its leases (connection not seen)'
        : html`<span class="badge warn">gone</span>`
  }</td></tr>`
}

function workersTable(p: Presence, live: Live): Html {
  const refused = p.refused
    ? html`<p class="note" role="status" data-note="client-list">Idle workers cannot be seen: ${p.refused}.</p>`
    : ''
  if (p.rows.length === 0) return html`${refused}<p class="empty">No worker is connected to the queues shown, and none holds a job.</p>`
  return html`${refused}<div class="scroll"><table class="workers"><caption>Workers of the queues shown: connected ones, and gone ones that
still hold jobs</caption><thead><tr><th scope="col">Queue</th><th scope="col">Worker</th><th scope="col">Host</th>
<th scope="col" class="num">Connections</th><th scope="col" class="num">Jobs in flight</th><th scope="col">Last seen</th></tr></thead>
<tbody>${p.rows.map((r, i) => workerRow(r, live, i))}</tbody></table></div>`
}

const policyCell = (policy: string | undefined): Html | string => {
  if (policy === undefined) return 'not reported'
  return policy === 'noeviction' ? html`<code>${policy}</code>` : html`<code class="bad">${policy}</code>`
}

function healthTable(h: RedisHealth): Html {
  if (h.refused) return html`<p class="note" role="status">${h.refused}.</p>`
  return html`<div class="scroll"><table class="health"><caption>Every primary</caption><thead><tr><th scope="col">Node</th>
<th scope="col">Version</th><th scope="col" class="num">Used memory</th><th scope="col" class="num">maxmemory</th>
<th scope="col">maxmemory-policy</th></tr></thead><tbody>${h.nodes.map(
    (n) => html`<tr><th scope="row"><code>${n.node}</code></th><td>${n.version}</td><td class="num">${bytes(n.usedMemory)}</td>
<td class="num">${n.maxmemory === 0 ? 'no limit' : bytes(n.maxmemory)}</td>
<td>${policyCell(n.policy)}</td></tr>`,
  )}</tbody></table></div>`
}

/** A queue's wait and processing time per minute; not refreshed (it reads up to 2 × TIMING_SAMPLE jobs). */
export function timingPage(view: View, d: { now: number; name: string; timing: Timing }, queuePath: string): string {
  const live = new Live(d.now)
  const main = html`<h1>Queue <code>${d.name}</code>: wait and processing time</h1>${renderTiming(d.timing, live)}`
  return page(
    {
      ...shell(view, live, `${d.name}: timing`, [{ label: d.name, href: queuePath }, { label: 'timing' }]),
      refreshMs: 0,
    },
    main,
  )
}

export interface WorkersPageData {
  now: number
  presence: Presence
  health: RedisHealth
}

export function workersPage(view: View, d: WorkersPageData, shape: string): { html: string; live: Live } {
  const live = new Live(d.now)
  live.shape = shape
  const main = html`<h1>Workers and Redis</h1>
<section aria-labelledby="workers-title"><h2 id="workers-title">Workers</h2>
<p class="hint">A worker is seen by its connection (named <code>&lt;prefix&gt;:&lt;base64(queue)&gt;:w:&lt;name&gt;</code>, as BullMQ
names it), last seen when that connection last sent a command; jobs in flight are read from the lease index.</p>
${workersTable(d.presence, live)}</section>
<section aria-labelledby="redis-title"><h2 id="redis-title">Redis</h2>${healthTable(d.health)}</section>`
  return { html: page(shell(view, live, 'Workers and Redis', [{ label: 'Workers and Redis' }]), main), live }
}
