/** Output helpers for the echomq command: aligned tables, and a spinner on stderr for slow steps. */

/** One line (or block) of the command's result on stdout; progress and errors go to stderr. */
export const out = (text: string): void => void process.stdout.write(`${text}\n`)

export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))]
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)))
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd()
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...cells.slice(1).map(line)].join('\n')
}

export interface Spinner {
  text(message: string): void
  stop(): void
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']

/** A spinner on stderr while `message` runs; silent when stderr is not a terminal or output is JSON. */
export function spinner(message: string, enabled = Boolean(process.stderr.isTTY)): Spinner {
  if (!enabled) return { text: () => undefined, stop: () => undefined }
  let current = message
  let frame = 0
  const draw = () => process.stderr.write(`\r\x1b[2K${FRAMES[frame++ % FRAMES.length]} ${current}`)
  draw()
  const timer = setInterval(draw, 80)
  return {
    text(next) {
      current = next
    },
    stop() {
      clearInterval(timer)
      process.stderr.write('\r\x1b[2K')
    },
  }
}

/** Runs `fn` under a spinner. */
export async function withSpinner<T>(message: string, enabled: boolean, fn: (s: Spinner) => Promise<T>): Promise<T> {
  const s = spinner(message, enabled)
  try {
    return await fn(s)
  } finally {
    s.stop()
  }
}

/** "10s", "500ms", "2m" or a plain number of ms. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim())
  if (!m?.[1]) return undefined
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] ?? 'ms'] ?? 1
  const ms = Math.round(Number(m[1]) * factor)
  return ms > 0 ? ms : undefined
}

/** Text for one table cell: whitespace runs (newlines in an error message) as one space, at most `max` characters. */
export function oneLine(text: string | undefined, max = 120): string {
  const flat = (text ?? '').replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}
