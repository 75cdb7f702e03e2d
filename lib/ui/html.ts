/**
 * HTML made safe by construction: `html` is a tagged template whose every interpolated value is escaped
 * unless it is already `Html` (made by `html` itself, or by `raw` for text this module's callers wrote).
 * Job data, names, errors, logs and queue names only ever reach a page through it, so a job whose data
 * is `<script>` shows the text. Attribute values are quoted by the templates and escaped here (& < > " ').
 */

export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c)

/** What a template may hold: text (escaped), numbers, Html, lists of those; null, undefined and false render nothing. */
export type Part = Html | string | number | boolean | null | undefined | Part[]

function render(part: Part): string {
  if (part === null || part === undefined || part === false || part === true) return ''
  if (part instanceof Html) return part.text
  if (Array.isArray(part)) return part.map(render).join('')
  return escapeHtml(String(part))
}

export function html(strings: TemplateStringsArray, ...parts: Part[]): Html {
  let out = strings[0] ?? ''
  for (let i = 0; i < parts.length; i++) out += render(parts[i]) + (strings[i + 1] ?? '')
  return new Html(out)
}

/** Markup written in this module's callers (never data). */
export const raw = (text: string): Html => new Html(text)

/** A query string from params (undefined ones left out), for links. */
export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined) search.set(k, String(v))
  const text = search.toString()
  return text === '' ? '' : `?${text}`
}
