/**
 * A job scheduler's timing, as upsertJobScheduler takes it (BullMQ's repeat options, every duration in
 * ms): `every` or a cron `pattern` (5 or 6 fields, seconds first when 6) evaluated in `tz` (an IANA zone,
 * UTC by default; DST handled by cron-parser, the library BullMQ uses), `limit` (iterations in all),
 * `startDate`, `endDate`, `immediately` (a pattern's first run at once), `offset` (an every schedule
 * aligned to multiples of `every` plus this). Validated here, before any Redis call; the times are
 * computed from Redis's clock (`now`, which the caller read), never the process's.
 *
 * The first run of an every schedule is at once, as BullMQ's. After that each iteration's successor is
 * due one period after it; periods missed while nothing ran at all (no worker and no sweep for longer
 * than CATCH_UP_MS) are skipped rather than replayed as a storm, so a schedule resumes at the present.
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

/** How late an iteration may be made: older periods were missed while nothing ran, and are skipped. */
export const CATCH_UP_MS = 5 * 60_000
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

/** The next occurrence of `pattern` strictly after `after` (ms), in `tz`. */
function cronNext(pattern: string, tz: string | undefined, after: number): number {
  return CronExpressionParser.parse(pattern, { currentDate: new Date(after), ...(tz ? { tz } : {}) })
    .next()
    .getTime()
}

export function timing(options: unknown): Timing {
  const o = checkKnown('upsertJobScheduler', options, ['every', 'pattern', 'tz', 'limit', 'startDate', 'endDate', 'immediately', 'offset'])
  if ((o.every === undefined) === (o.pattern === undefined)) {
    fail('ERR_OPTIONS', 'expected a job scheduler to have either every (ms) or pattern (a cron expression), not both and not neither')
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
  if (t.immediately && t.startDate !== undefined) fail('ERR_OPTIONS', 'immediately and startDate cannot both be given')
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

/**
 * When the iteration after the one due at `after` is due, skipping periods older than CATCH_UP_MS before
 * `now`; undefined when there is none (past endDate, or `made` iterations already reach the limit).
 */
export function successorDue(t: Timing, after: number, now: number, made: number): number | undefined {
  if (t.limit !== undefined && made >= t.limit) return undefined
  const earliest = now - CATCH_UP_MS
  let due: number
  if (t.every !== undefined) {
    due = after + t.every
    if (due < earliest) due = after + t.every * Math.ceil((earliest - after) / t.every)
  } else due = cronNext(t.pattern as string, t.tz, Math.max(after, earliest - 1))
  return t.endDate !== undefined && due > t.endDate ? undefined : due
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
