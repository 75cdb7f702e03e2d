/**
 * The page shell and the pieces every page uses: live values, times, action forms.
 *
 * Live values: a page is rendered with a `Live` collector; `live.text(key, value)` and `live.time(key, at)`
 * put a value in the page and record it. A refresh asks the same URL for JSON (Accept: application/json)
 * and gets the recorded values ({ now, shape, text, times, chart }); the page's script sets each element's
 * textContent (never HTML) and times' titles. `shape` names what the page's structure depends on (the
 * ids listed, a job's state, paused or not): when it differs, the script shows a "changed: reload" note
 * instead of rebuilding the page under the reader's keyboard focus.
 */
import type { Minute } from './chart.js'
import { absolute, exact, relative } from './format.js'
import { type Html, html, type Part, raw } from './html.js'

export class Live {
  readonly text: Record<string, string> = {}
  readonly times: Record<string, number> = {}
  shape = ''
  chart: Minute[] | undefined

  constructor(readonly now: number) {}

  /** A value refreshed in place. */
  value(key: string, value: string, className?: string): Html {
    this.text[key] = value
    return html`<span data-live="${key}"${className ? raw(` class="${className}"`) : ''}>${value}</span>`
  }

  /** A time shown relative to now, exact on hover; `kind` 'lease' reads "12 s left" / "lapsed". */
  time(key: string, at: number, kind: 'ago' | 'lease' = 'ago'): Html {
    this.times[key] = at
    const text = kind === 'lease' ? leaseText(at, this.now) : relative(at, this.now)
    const attrs = html`data-live-time="${key}" data-kind="${kind}" data-at="${at}" datetime="${exact(at)}" title="${exact(at)}"`
    return html`<time ${attrs}>${timeText(text, at)}</time>`
  }

  /** A time that is not refreshed (a job's creation). */
  fixedTime(at: number): Html {
    return html`<time data-kind="ago" data-at="${at}" datetime="${exact(at)}" title="${exact(at)}">${timeText(relative(at, this.now), at)}</time>`
  }

  json(): object {
    return { now: this.now, shape: this.shape, text: this.text, times: this.times, ...(this.chart ? { chart: this.chart } : {}) }
  }
}

/** A time's text: relative (kept current by the page's script), then absolute in UTC. */
const timeText = (text: string, at: number): Html => html`<span class="rel">${text}</span> <span class="abs">${absolute(at)}</span>`

function leaseText(deadline: number, now: number): string {
  const left = deadline - now
  return left > 0 ? `${Math.ceil(left / 1_000)} s left` : 'lapsed'
}

export interface Shell {
  base: string
  title: string
  crumbs: { label: string; href?: string }[]
  where: string | undefined
  readOnly: boolean
  refreshMs: number
  live: Live
  notice?: string | undefined
  /** Shown above every page's content while it holds (a Redis that may evict keys: operator-page.ts). */
  banner?: Html | undefined
}

/** A page's shell from what every page of one request shares (the view) and what this page adds. */
export function shell(view: Omit<Shell, 'title' | 'crumbs' | 'live'>, live: Live, title: string, crumbs: Shell['crumbs']): Shell {
  const { base, where, readOnly, refreshMs, notice, banner } = view
  return { base, title, crumbs, where, readOnly, refreshMs, live, notice, banner }
}

const crumb = (c: { label: string; href?: string }) =>
  html`<li>${c.href ? html`<a href="${c.href}">${c.label}</a>` : html`<span aria-current="page">${c.label}</span>`}</li>`

export function page(shell: Shell, main: Part): string {
  const { base, live } = shell
  return `<!doctype html>${
    html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${shell.title} · EchoMQ</title>
<link rel="stylesheet" href="${base}/assets/app.css">
<script src="${base}/assets/app.js" defer></script>
</head>
<body data-now="${live.now}" data-shape="${live.shape}" data-refresh-ms="${shell.refreshMs}">
<a class="skip" href="#main">Skip to content</a>
<header>
  <nav aria-label="Breadcrumb"><ol>
    <li><a class="home" href="${base}/">EchoMQ</a></li>
    ${shell.crumbs.map(crumb)}
  </ol></nav>
  <a class="ops" href="${base}/workers">Workers and Redis</a>
  <p class="where">${shell.where ?? ''}${shell.readOnly ? html` <span class="badge">read-only</span>` : ''}</p>
</header>
<p id="stale" class="note" role="status" hidden>This page changed since it was loaded. <a href="">Reload</a></p>
<p id="offline" class="note error" role="status" hidden>Cannot refresh: <span id="offline-reason"></span></p>
${shell.notice ? html`<p class="note done" role="status">${shell.notice}</p>` : ''}
${shell.banner ?? ''}
<main id="main" tabindex="-1">
${main}
</main>
</body>
</html>`.text
  }\n`
}

/**
 * A POST form for one action: the page's token in a hidden field (a POST without it is refused), the
 * action's name, and any other fields. Absent in read-only mode (the caller checks).
 */
export function actionForm(
  path: string,
  token: string,
  action: string,
  label: string,
  fields: Record<string, string> = {},
  className = '',
): Html {
  return html`<form method="post" action="${path}" class="inline">
<input type="hidden" name="token" value="${token}"><input type="hidden" name="action" value="${action}">
${Object.entries(fields).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<button type="submit"${className ? raw(` class="${className}"`) : ''}>${label}</button></form>`
}
