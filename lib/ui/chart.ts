/**
 * The chart of finished jobs per minute over the last hour: an inline SVG of 60 stacked bars (completed
 * below, failed above), drawn here for the first paint and redrawn by the page's script from the same
 * series on each refresh (assets/app.js keeps the geometry below: 10 px a bar, 100 px high). The series
 * comes from lib/redis/queries.ts finishedPerMinute: a hash of 180 fields per queue that the finish and
 * sweep scripts keep (a read and a write per finished job, nothing while idle).
 */
import { count } from './format.js'
import { type Html, html } from './html.js'

export interface Minute {
  minute: number
  completed: number
  failed: number
}

const BAR_WIDTH = 10
const CHART_HEIGHT = 100

/** The sum of several queues' series (all read at the same minute). */
export function sumSeries(all: Minute[][]): Minute[] {
  const first = all[0]
  if (!first) return []
  return first.map((m, i) => ({
    minute: m.minute,
    completed: all.reduce((a, s) => a + (s[i]?.completed ?? 0), 0),
    failed: all.reduce((a, s) => a + (s[i]?.failed ?? 0), 0),
  }))
}

const hhmm = (minute: number) => new Date(minute * 60_000).toISOString().slice(11, 16)

/** One bar's geometry: heights scaled to the busiest minute. */
function bar(m: Minute, max: number): { completed: number; failed: number } {
  const scale = max === 0 ? 0 : CHART_HEIGHT / max
  return { completed: Math.round(m.completed * scale), failed: Math.round(m.failed * scale) }
}

export function chart(series: Minute[], title: string): Html {
  const max = Math.max(0, ...series.map((m) => m.completed + m.failed))
  const total = series.reduce((a, m) => ({ completed: a.completed + m.completed, failed: a.failed + m.failed }), {
    completed: 0,
    failed: 0,
  })
  const width = BAR_WIDTH * series.length
  const first = series[0]
  const last = series[series.length - 1]
  return html`<figure class="chart" data-chart>
  <figcaption>${title}: <span data-chart-total="completed">${count(total.completed)}</span> completed,
    <span data-chart-total="failed">${count(total.failed)}</span> failed in the last hour
    (busiest minute: <span data-chart-max>${count(max)}</span>)</figcaption>
  <svg viewBox="0 0 ${width} ${CHART_HEIGHT}" preserveAspectRatio="none" role="img" aria-label="${title}: finished jobs per minute">
    ${series.map((m, i) => {
      const b = bar(m, max)
      const x = i * BAR_WIDTH
      return html`<g data-bar="${i}"><title>${hhmm(m.minute)} UTC: ${count(m.completed)} completed, ${count(m.failed)} failed</title><rect
      class="c" x="${x + 1}" width="${BAR_WIDTH - 2}" y="${CHART_HEIGHT - b.completed}" height="${b.completed}"></rect><rect
      class="f" x="${x + 1}" width="${BAR_WIDTH - 2}" y="${CHART_HEIGHT - b.completed - b.failed}" height="${b.failed}"></rect></g>`
    })}
  </svg>
  <div class="axis"><span data-minute="${first?.minute ?? ''}">${first ? `${hhmm(first.minute)} UTC` : ''}</span><span
    data-minute="${last?.minute ?? ''}">${last ? `${hhmm(last.minute)} UTC` : ''}</span></div>
</figure>`
}
