/**
 * A job scheduler's timing, as upsertJobScheduler takes it (BullMQ's repeat options, every duration in
 * ms): `every` or a cron `pattern` (5 or 6 fields, seconds first when 6) evaluated in `tz` (an IANA zone,
 * UTC by default; DST handled by cron-parser, the library BullMQ uses), `limit` (iterations in all),
 * `startDate`, `endDate`, `immediately` (a pattern's first run at once), `offset` (an every schedule
 * aligned to multiples of `every` plus this). Validated here, before any Redis call; the times are
 * computed from Redis's clock (`now`, which the caller read), never the process's.
 *
 * The first run of an every schedule is at once, as BullMQ's. After that a period is due one period after
 * the last; a schedule behind (no worker took its runs, and the sweep ran minutes apart) is caught up by
 * duePeriods: every period due since, up to the catch-up limit (the last CATCH_UP_MS, at most
 * CATCH_UP_MAX_RUNS periods), older ones skipped rather than replayed as a storm.
 */
import { CronExpressionParser } from 'cron-parser'
import { checkInteger, checkKnown, describe, fail, opt } from '../validate.js'

export interface RepeatOptions {
  every?: number
  pattern?: string
  tz?: string
  limit?: number
  startDate?: Date | string | number
  endDate?: Date | string | number
  immediately?: boolean
  offset?: number
}

/** The timing, validated: dates as ms. */
export interface Timing {
  every?: number
  pattern?: string
  tz?: string
  limit?: number
  startDate?: number
  endDate?: number
  immediately: boolean
  offset: number
}

/** How late a period may be made: older periods were missed while nothing ran, and are skipped. */
export const CATCH_UP_MS = 5 * 60_000
/**
 * Most periods one catch-up makes for a scheduler (the newest ones): an `every` of a few ms behind by
 * minutes would otherwise make tens of thousands of jobs in one pass. A cron pattern has at most 300
 * periods in CATCH_UP_MS (one a second), so the limit binds only an `every` under 300 ms.
 */
export const CATCH_UP_MAX_RUNS = 1_000
/** The longest `every`: a year, as the longest delay. */
const MAX_EVERY_MS = 365 * 24 * 3_600_000

/** The last ms a Date can hold. */
const MAX_DATE_MS = 8.64e15

function date(name: string, value: unknown): number {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : value
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_DATE_MS) {
    fail('ERR_OPTIONS', `expected ${name} to be a Date, an ISO date or ms since the epoch, got: ${describe(value)}`)
  }
  return Math.floor(ms)
}

function zone(value: unknown): string {
  try {
    if (typeof value !== 'string' || value === '') throw new Error('not text')
    new Intl.DateTimeFormat('en-US', { timeZone: value })
    return value
  } catch {
    return fail('ERR_OPTIONS', `expected tz to be an IANA time zone such as Europe/Paris, got: ${describe(value)}`)
  }
}

/** The occurrences of `pattern` in `tz` strictly after `after` (ms), in order. */
function* cronFrom(pattern: string, tz: string | undefined, after: number): Generator<number> {
  const expression = CronExpressionParser.parse(pattern, { currentDate: new Date(after), ...(tz ? { tz } : {}) })
  for (;;) yield expression.next().getTime()
}

/** The next occurrence of `pattern` strictly after `after` (ms), in `tz`. */
function cronNext(pattern: string, tz: string | undefined, after: number): number {
  return cronFrom(pattern, tz, after).next().value as number
}

export function timing(options: unknown): Timing {
  const o = checkKnown('upsertJobScheduler', options, ['every', 'pattern', 'tz', 'limit', 'startDate', 'endDate', 'immediately', 'offset'])
  // BullMQ's words, so a program that matches them still does.
  if (o.every !== undefined && o.pattern !== undefined)
    fail('ERR_OPTIONS', 'Both .pattern and .every options are defined for this repeatable job')
  if (o.every === undefined && o.pattern === undefined) {
    fail(
      'ERR_OPTIONS',
      'Either .pattern or .every options must be defined for this repeatable job: every (ms) or pattern (a cron expression)',
    )
  }
  const t: Timing = {
    immediately: opt(o.immediately, false, (v) => {
      if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected immediately to be true or false, got: ${describe(v)}`)
      return v
    }),
    offset: opt(o.offset, 0, (v) => checkInteger('offset', v, { min: 0, max: MAX_EVERY_MS, unit: 'ms' })),
  }
  if (o.every !== undefined) t.every = checkInteger('every', o.every, { min: 1, max: MAX_EVERY_MS, unit: 'ms' })
  if (o.tz !== undefined) t.tz = zone(o.tz)
  if (o.pattern !== undefined) {
    if (typeof o.pattern !== 'string' || o.pattern.trim() === '')
      fail('ERR_OPTIONS', `expected pattern to be a cron expression, got: ${describe(o.pattern)}`)
    try {
      cronNext(o.pattern, t.tz, Date.now())
    } catch (err) {
      fail(
        'ERR_OPTIONS',
        `expected pattern to be a cron expression such as "0 */5 * * * *", got ${describe(o.pattern)}: ${(err as Error).message}`,
      )
    }
    t.pattern = o.pattern
  }
  if (o.limit !== undefined) t.limit = checkInteger('limit', o.limit, { min: 1, max: Number.MAX_SAFE_INTEGER })
  if (o.startDate !== undefined) t.startDate = date('startDate', o.startDate)
  if (o.endDate !== undefined) t.endDate = date('endDate', o.endDate)
  if (t.immediately && t.startDate !== undefined)
    fail('ERR_OPTIONS', 'Both .immediately and .startDate options are defined for this repeatable job')
  if (t.offset > 0 && t.every === undefined) fail('ERR_OPTIONS', 'offset goes with every, not with pattern')
  if (t.startDate !== undefined && t.endDate !== undefined && t.endDate < t.startDate) {
    fail('ERR_OPTIONS', `expected endDate to be after startDate, got ${new Date(t.endDate).toISOString()}`)
  }
  return t
}

/** When the first iteration is due, by Redis's clock `now`; undefined when there is none (past endDate). */
export function firstDue(t: Timing, now: number): number | undefined {
  const from = Math.max(t.startDate ?? now, now)
  let due: number
  if (t.every !== undefined) {
    if (t.offset > 0 && t.startDate === undefined) {
      due = Math.floor(now / t.every) * t.every + t.offset
      if (due < now) due += t.every
    } else due = from
  } else due = t.immediately ? now : cronNext(t.pattern as string, t.tz, from - 1)
  return t.endDate !== undefined && due > t.endDate ? undefined : due
}

/** The period after the one due at `due`; undefined past endDate. */
export function successorDue(t: Timing, due: number): number | undefined {
  const next = t.every !== undefined ? due + t.every : cronNext(t.pattern as string, t.tz, due)
  return t.endDate !== undefined && next > t.endDate ? undefined : next
}

/** What a schedule behind its time makes: its periods due by `now`, oldest first, and the one after them. */
export interface DuePeriods {
  /** Due times (ms) from `next` to `now` within the catch-up limit (older ones skipped), oldest first. */
  due: number[]
  /** The first period after `now`; undefined when there is none (past endDate). */
  after: number | undefined
}

/**
 * The periods of a schedule whose next period is due at `next`, up to Redis's clock `now`: those within
 * the catch-up limit (the last CATCH_UP_MS, the newest CATCH_UP_MAX_RUNS), and the one after them. The
 * limit on how many in all (`limit`) is the script's to apply: it knows how many were made.
 */
export function duePeriods(t: Timing, next: number, now: number): DuePeriods {
  const end = t.endDate ?? Number.POSITIVE_INFINITY
  const earliest = now - CATCH_UP_MS
  let due: number[] = []
  let after: number
  if (t.every !== undefined) {
    // next + k * every for k from the oldest period kept to the newest due.
    const newest = Math.floor((Math.min(now, end) - next) / t.every)
    const oldest = Math.max(0, Math.ceil((earliest - next) / t.every), newest - CATCH_UP_MAX_RUNS + 1)
    for (let k = oldest; k <= newest; k++) due.push(next + k * t.every)
    after = next + (Math.floor((now - next) / t.every) + 1) * t.every
    if (next > now) after = next
  } else {
    const occurrences = cronFrom(t.pattern as string, t.tz, Math.max(next, earliest) - 1)
    let at = occurrences.next().value as number
    for (; at <= now; at = occurrences.next().value as number) if (at <= end) due.push(at)
    after = at
    due = due.slice(-CATCH_UP_MAX_RUNS)
  }
  return { due, after: after > end ? undefined : after }
}

/** The timing as the scheduler hash's fields (name, value, ...). */
export function timingFields(t: Timing): string[] {
  const f: string[] = []
  for (const key of ['every', 'pattern', 'tz', 'limit', 'startDate', 'endDate'] as const) {
    if (t[key] !== undefined) f.push(key, String(t[key]))
  }
  f.push('offset', String(t.offset))
  if (t.immediately) f.push('immediately', '1')
  return f
}

/** The timing read back from the scheduler hash. */
export function timingFromHash(h: Record<string, string>): Timing {
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v))
  const t: Timing = { immediately: h.immediately === '1', offset: Number(h.offset ?? 0) }
  const every = num(h.every)
  if (every !== undefined) t.every = every
  if (h.pattern !== undefined) t.pattern = h.pattern
  if (h.tz !== undefined) t.tz = h.tz
  const limit = num(h.limit)
  if (limit !== undefined) t.limit = limit
  const startDate = num(h.startDate)
  if (startDate !== undefined) t.startDate = startDate
  const endDate = num(h.endDate)
  if (endDate !== undefined) t.endDate = endDate
  return t
}

/** Whether two timings give the same iterations (so a pending iteration may be kept on an upsert). */
export function sameTiming(a: Timing, b: Timing): boolean {
  return timingFields(a).join('\u0000') === timingFields(b).join('\u0000')
}
