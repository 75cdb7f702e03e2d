/**
 * Numbers and times as the pages show them. Times are relative ("2 min ago", "in 40 s"), measured against
 * Redis's clock (every stamp EchoMQ writes is Redis's), with the absolute time in UTC beside them
 * (2026-12-02T04:55:01Z) and to the millisecond in the element's title; the page's script (assets/app.js,
 * `relative`, the same rules) keeps them current between refreshes.
 */

export const count = (n: number): string => n.toLocaleString('en-US')

/** A span of ms in the largest unit that fits: 850 ms, 12 s, 3 min, 5 h, 2 d. */
export function span(ms: number): string {
  const a = Math.abs(ms)
  if (a < 1_000) return `${Math.round(a)} ms`
  if (a < 60_000) return `${Math.floor(a / 1_000)} s`
  if (a < 3_600_000) return `${Math.floor(a / 60_000)} min`
  if (a < 86_400_000) return `${Math.floor(a / 3_600_000)} h`
  return `${Math.floor(a / 86_400_000)} d`
}

/** `at` relative to `now` (ms): "2 min ago", "in 40 s", "now". */
export function relative(at: number, now: number): string {
  const d = at - now
  if (Math.abs(d) < 1_000) return 'now'
  return d < 0 ? `${span(d)} ago` : `in ${span(d)}`
}

/** The exact time, for a title: ISO 8601 in UTC. */
export const exact = (at: number): string => new Date(at).toISOString()

/** The exact time shown beside a relative one: ISO 8601 in UTC to the second (2026-12-02T04:55:01Z). */
export const absolute = (at: number): string => new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z')

/** JSON for display: indented, long texts as they are (escaping is the template's job). */
export function pretty(value: unknown): string {
  if (value === undefined) return ''
  try {
    return JSON.stringify(value, null, 2) ?? String(value)
  } catch {
    return String(value)
  }
}
