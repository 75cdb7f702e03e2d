/** Printing: numbers, ratios, spreads, tables, and the shape every bench reports its targets in. */
import type { Spread } from './util.js'

export interface Target {
  name: string
  /** Undefined for a figure reported without a target. */
  pass: boolean | undefined
  figures: string
}

export const fmt = (n: number, digits = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : String(n)

export const x = (r: number) => (Number.isFinite(r) ? `${r < 0.1 ? r.toFixed(4) : r.toFixed(2)}x` : 'inf')

/** A ratio's median with its range over the runs: `0.45x (0.41-0.52)`. */
export const xs = (s: Spread) => `${x(s.median)} (${x(s.min).slice(0, -1)}-${x(s.max)})`

/** A figure's median with its range over the runs: `1,234 (1,100-1,300)`. */
export const fs = (s: Spread, digits = 0) => `${fmt(s.median, digits)} (${fmt(s.min, digits)}-${fmt(s.max, digits)})`

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ')
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

/** `{ evalsha: 2, bzpopmin: 1 }` as `evalsha 2, bzpopmin 1`. */
export const commandList = (c: Record<string, number>) =>
  Object.entries(c)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${fmt(v, Number.isInteger(v) ? 0 : 1)}`)
    .join(', ') || 'none'
