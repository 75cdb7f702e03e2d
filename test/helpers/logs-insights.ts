/**
 * Just enough of CloudWatch Logs Insights and of metric filter patterns to run the documented queries and the
 * template's filters against the reaper's own log lines and Lambda's (JSON events, whose keys Logs Insights
 * discovers as fields, dotted for nested ones; `@message` is the event's text). Supported: `filter` with
 * `and`, `or`, parentheses, `=`, `!=`, `>`, `<`, `ispresent(f)`, `like /re/` (a comparison with an absent
 * field is false, as in Logs Insights); `stats count(*)|sum(f)|max(f) [as name], ... [by f, ...]`; `fields`;
 * `sort f [asc|desc], ...`; `limit n`. Anything else throws, so a query changed into something this cannot
 * read fails the test.
 */
import { readFileSync } from 'node:fs'

type Row = Record<string, unknown>

const get = (row: Row, path: string): unknown =>
  path === '@message' && row['@message'] === undefined
    ? JSON.stringify(row)
    : path.split('.').reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Row)[k] : undefined), row)

/**
 * Splits `text` at each `separator` (a RegExp matching at the start of the rest) outside quotes, parentheses
 * and /regex/ literals (one opens after `like`).
 */
function splitOutside(text: string, separator: RegExp): string[] {
  const parts: string[] = []
  let depth = 0
  let quote = ''
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string
    if (quote) {
      if (c === quote) quote = ''
      continue
    }
    if (c === "'" || c === '"') quote = c
    else if (c === '/' && /\blike\s*$/.test(text.slice(0, i))) quote = '/'
    else if (c === '(') depth++
    else if (c === ')') depth--
    else if (depth === 0) {
      const m = separator.exec(text.slice(i))
      if (m?.index === 0) {
        parts.push(text.slice(start, i))
        start = i + m[0].length
        i = start - 1
      }
    }
  }
  parts.push(text.slice(start))
  return parts.map((p) => p.trim())
}

/** A filter expression: `or` of `and`s of conditions, parentheses grouping. */
function expression(text: string): (row: Row) => boolean {
  const t = text.trim()
  const ors = splitOutside(t, /^\s+or\s+/)
  if (ors.length > 1) {
    const tests = ors.map(expression)
    return (row) => tests.some((test) => test(row))
  }
  const ands = splitOutside(t, /^\s+and\s+/)
  if (ands.length > 1) {
    const tests = ands.map(expression)
    return (row) => tests.every((test) => test(row))
  }
  if (t.startsWith('(') && t.endsWith(')') && splitOutside(t.slice(1, -1), /^\)/).length === 1) return expression(t.slice(1, -1))
  return condition(t)
}

function literal(text: string): unknown {
  const t = text.trim()
  if (/^'.*'$|^".*"$/.test(t)) return t.slice(1, -1)
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t)
  throw new Error(`logs-insights: unsupported literal ${t}`)
}

function condition(text: string): (row: Row) => boolean {
  const c = text.trim()
  let m = /^ispresent\((\S+)\)$/.exec(c)
  if (m?.[1]) {
    const f = m[1]
    return (row) => get(row, f) !== undefined
  }
  m = /^(\S+)\s+like\s+\/(.*)\/$/.exec(c)
  if (m?.[1] && m[2] !== undefined) {
    const [f, re] = [m[1], new RegExp(m[2])]
    return (row) => re.test(String(get(row, f) ?? ''))
  }
  m = /^(\S+)\s*(=|>|<|!=)\s*(.+)$/.exec(c)
  if (m?.[1] && m[2] && m[3]) {
    const [f, op, value] = [m[1], m[2], literal(m[3])]
    return (row) => {
      const v = get(row, f)
      if (v === undefined) return false
      if (op === '=') return v === value
      if (op === '!=') return v !== value
      return typeof v === 'number' && (op === '>' ? v > (value as number) : v < (value as number))
    }
  }
  throw new Error(`logs-insights: unsupported condition ${c}`)
}

export function logsInsights(query: string, events: Row[]): Row[] {
  if (query.trim() === '') throw new Error('logs-insights: empty query')
  let rows = events
  for (const command of splitOutside(query, /^\|/)) {
    const [verb = '', ...rest] = command.split(/\s+/)
    const args = rest.join(' ')
    if (verb === 'filter') {
      const test = expression(args)
      rows = rows.filter((row) => test(row))
    } else if (verb === 'fields') {
      const fields = args.split(',').map((f) => f.trim())
      rows = rows.map((row) => Object.fromEntries(fields.map((f) => [f, get(row, f)])))
    } else if (verb === 'stats') {
      const [aggText = '', byText] = args.split(/\s+by\s+/)
      const by = byText ? byText.split(',').map((f) => f.trim()) : []
      const aggs = aggText.split(/,(?![^(]*\))/).map((a) => {
        const m = /^\s*(count|sum|max)\(([^)]*)\)(?:\s+as\s+(\w+))?\s*$/.exec(a)
        if (!m?.[1]) throw new Error(`logs-insights: unsupported aggregate ${a}`)
        return { fn: m[1], field: m[2] ?? '', name: m[3] ?? `${m[1]}(${m[2]})` }
      })
      const groups = new Map<string, Row[]>()
      for (const row of rows) {
        const key = JSON.stringify(by.map((f) => get(row, f)))
        groups.set(key, [...(groups.get(key) ?? []), row])
      }
      rows = [...groups.entries()].map(([key, members]) => {
        const out: Row = Object.fromEntries(by.map((f, i) => [f, (JSON.parse(key) as unknown[])[i]]))
        for (const { fn, field, name } of aggs) {
          const values = members.map((r) => get(r, field)).filter((v): v is number => typeof v === 'number')
          out[name] = fn === 'count' ? members.length : fn === 'sum' ? values.reduce((a, b) => a + b, 0) : Math.max(...values)
        }
        return out
      })
    } else if (verb === 'sort') {
      const keys = args.split(',').map((k) => {
        const [field = '', dir = 'asc'] = k.trim().split(/\s+/)
        return { field, sign: dir === 'desc' ? -1 : 1 }
      })
      rows = [...rows].sort((a, b) => {
        for (const { field, sign } of keys) {
          const [x, y] = [get(a, field), get(b, field)] as [number, number]
          if (x !== y) return (x > y ? 1 : -1) * sign
        }
        return 0
      })
    } else if (verb === 'limit') {
      rows = rows.slice(0, Number(args))
    } else {
      throw new Error(`logs-insights: unsupported command ${verb}`)
    }
  }
  return rows
}

/** A CloudWatch Logs JSON metric filter pattern: `{ ($.a = "x") && ($.b IS FALSE) }` (=, IS TRUE/FALSE, &&). */
export function metricFilterMatches(pattern: string, event: Row): boolean {
  const body = /^\{(.*)\}$/.exec(pattern.trim())?.[1]
  if (body === undefined) throw new Error(`metric filter: not a JSON pattern ${pattern}`)
  return body.split('&&').every((part) => {
    const c = part
      .trim()
      .replace(/^\((.*)\)$/, '$1')
      .trim()
    let m = /^\$\.(\S+)\s+IS\s+(TRUE|FALSE)$/.exec(c)
    if (m?.[1]) return get(event, m[1]) === (m[2] === 'TRUE')
    m = /^\$\.(\S+)\s*=\s*"(.*)"$/.exec(c)
    if (m?.[1]) return get(event, m[1]) === m[2]
    throw new Error(`metric filter: unsupported condition ${c}`)
  })
}

/** docs/reaper.md's Logs Insights queries, each under the comment line that names it (`# per queue`). */
export function docQueries(): Record<string, string> {
  const doc = readFileSync(new URL('../../docs/reaper.md', import.meta.url), 'utf8')
  const block = /```logs-insights\n([\s\S]*?)```/.exec(doc)?.[1] ?? ''
  const out: Record<string, string> = {}
  let name = ''
  for (const line of block.split('\n')) {
    if (line.startsWith('# ')) name = line.slice(2).trim()
    else if (line.trim() !== '') out[name] = `${out[name] ? `${out[name]} ` : ''}${line.trim()}`
  }
  return out
}
