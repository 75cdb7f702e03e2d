/**
 * Wait and processing time per minute, from the jobs that finished in the last hour and are still kept
 * (`completed` and `failed`, the newest TIMING_SAMPLE of each): a job waited from when it last joined
 * the line (its creation, its promotion from `delayed`, a retry or a recovery) to its last start, and ran
 * from that start to its finish. Nothing is recorded for this: a queue that keeps no finished jobs
 * (removeOnComplete: true) has no figures, and the page says so.
 */
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { type RunTimes, recentRunTimes } from '../redis/operator-reads.js'
import { count, span } from './format.js'
import { type Html, html } from './html.js'
import type { Live } from './layout.js'

/** Finished jobs read per set (completed, failed) for the figures. */
const TIMING_SAMPLE = 200
/** Minutes shown, newest first. */
const MINUTES_SHOWN = 15

export interface MinuteTiming {
  /** The minute (ms / 60000) in which the jobs finished. */
  minute: number
  jobs: number
  waitP50: number
  waitP95: number
  runP50: number
  runP95: number
}

export interface Timing {
  minutes: MinuteTiming[]
  /** Jobs the figures come from. */
  sampled: number
}

/** The value at quantile q of sorted numbers (nearest rank). */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0
}

export function perMinute(runs: RunTimes[]): MinuteTiming[] {
  const byMinute = new Map<number, RunTimes[]>()
  for (const r of runs) {
    const minute = Math.floor(r.finishedOn / 60_000)
    byMinute.set(minute, [...(byMinute.get(minute) ?? []), r])
  }
  return [...byMinute]
    .sort(([a], [b]) => b - a)
    .map(([minute, list]) => {
      const waits = list.map((r) => Math.max(0, r.startedOn - r.readyAt)).sort((a, b) => a - b)
      const runsMs = list.map((r) => Math.max(0, r.finishedOn - r.startedOn)).sort((a, b) => a - b)
      return {
        minute,
        jobs: list.length,
        waitP50: quantile(waits, 0.5),
        waitP95: quantile(waits, 0.95),
        runP50: quantile(runsMs, 0.5),
        runP95: quantile(runsMs, 0.95),
      }
    })
}

export async function readTiming(client: RedisClient, keys: QueueKeys, now: number): Promise<Timing> {
  const runs = await recentRunTimes(client, keys, now - 3_600_000, TIMING_SAMPLE)
  return { minutes: perMinute(runs), sampled: runs.length }
}

export function renderTiming(t: Timing, live: Live): Html {
  const shown = t.minutes.slice(0, MINUTES_SHOWN)
  return html`<section aria-labelledby="timing-title"><h2 id="timing-title">Wait and processing time per minute</h2>
<p class="hint">From the ${count(t.sampled)} newest jobs kept that finished in the last hour (at most ${count(TIMING_SAMPLE)}
completed and ${count(TIMING_SAMPLE)} failed). Wait: from joining the line to the last start; processing: from the last start
to the finish. A queue that keeps no finished jobs (removeOnComplete) has no figures.</p>
${
  shown.length === 0
    ? html`<p class="empty">No finished job kept from the last hour.</p>`
    : html`<table class="timing"><thead><tr><th scope="col">Minute (UTC)</th><th scope="col" class="num">Jobs</th>
<th scope="col" class="num">Wait p50</th><th scope="col" class="num">Wait p95</th><th scope="col" class="num">Processing p50</th>
<th scope="col" class="num">Processing p95</th></tr></thead>
<tbody>${shown.map(
        (m) => html`<tr><th scope="row">${live.fixedTime(m.minute * 60_000)}</th>
<td class="num">${count(m.jobs)}</td><td class="num">${span(m.waitP50)}</td><td class="num">${span(m.waitP95)}</td>
<td class="num">${span(m.runP50)}</td><td class="num">${span(m.runP95)}</td></tr>`,
      )}</tbody></table>`
}</section>`
}
