/**
 * Captures what the reaper writes: the Powertools Logger and the EMF lines write to process.stdout and
 * process.stderr themselves (not through console), so the streams are spied on, each line kept with its
 * stream and, when it is JSON, parsed. Call in beforeEach; vi.restoreAllMocks() in afterEach undoes it.
 */
import { afterEach, beforeEach, vi } from 'vitest'

export type LogLine = Record<string, unknown> & { stream: 'stdout' | 'stderr' }

export interface CapturedLogs {
  /** Every JSON line, parsed, with its stream. */
  lines: LogLine[]
  /** Every line as written (JSON or not), both streams. */
  text: string[]
  /** The first JSON line whose message is `message` (or matches it). */
  line(message: string | RegExp): LogLine | undefined
  clear(): void
}

export function captureLogs(): CapturedLogs {
  const lines: LogLine[] = []
  const text: string[] = []
  const spy = (stream: 'stdout' | 'stderr') =>
    vi.spyOn(process[stream], 'write').mockImplementation((chunk: string | Uint8Array) => {
      for (const l of String(chunk).split('\n').filter(Boolean)) {
        text.push(l)
        try {
          const parsed = JSON.parse(l)
          if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) lines.push({ ...parsed, stream })
        } catch {
          // not JSON: kept in `text` only
        }
      }
      return true
    })
  spy('stdout')
  spy('stderr')
  // ioredis and Node warn through console.warn (stderr), outside the spied streams under vitest.
  vi.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => void text.push(args.map(String).join(' ')))
  return {
    lines,
    text,
    line: (message) => lines.find((l) => (typeof message === 'string' ? l.message === message : message.test(String(l.message)))),
    clear() {
      lines.length = 0
      text.length = 0
    },
  }
}

/** The logs of each test: captured afresh before it, released after it; read through the returned object. */
export function useCapturedLogs(): CapturedLogs {
  let logs: CapturedLogs | undefined
  beforeEach(() => {
    logs = captureLogs()
  })
  afterEach(() => vi.restoreAllMocks())
  const current = () => {
    if (!logs) throw new Error('the logs are captured before each test')
    return logs
  }
  return {
    get lines() {
      return current().lines
    },
    get text() {
      return current().text
    },
    line: (message) => current().line(message),
    clear: () => current().clear(),
  }
}
