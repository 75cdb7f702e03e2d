/**
 * Deduplication, with BullMQ 6.7's names and meaning: the job option `deduplication: { id, ttl?, extend?,
 * replace?, reschedule?, keepLastIfActive? }`; an add whose id is held returns the job that holds it (and
 * emits `deduplicated` with { jobId, deduplicationId, deduplicatedJobId }); `queue.getDeduplicationJobId(id)`,
 * `queue.removeDeduplicationKey(id)`. Without a ttl the id is held until its job completes or fails for
 * good (or is removed); with a ttl (ms) until the ttl passes, whatever the job does, as in BullMQ.
 * `extend` restarts the ttl on each deduplicated add; `replace` replaces a holder that is still delayed
 * with the new job (debouncing); `reschedule` keeps a holder that is still delayed but makes it due the new
 * add's delay from now (ignored with `replace`); `keepLastIfActive` stores an add made while the holder runs
 * as the id's next job, added when the holder ends for good (the latest such add wins; the hold then has no
 * ttl: `ttl` is ignored, as BullMQ ignores it). BullMQ 6.7 refuses the old `debounce` option, and so does
 * EchoMQ. Where an id is held is in
 * lua/includes/deduplicate.lua. A job without the option costs nothing: no field, no key, no command.
 */
import { checkInteger, checkKnown, describe, fail, opt } from './validate.js'

export interface DeduplicationOptions {
  /** The deduplication id: adds with the same id while it is held return the holder. */
  id: string
  /** ms the id is held (none: until the job completes or fails). */
  ttl?: number
  /** Restart the ttl on each deduplicated add (with ttl). */
  extend?: boolean
  /** Replace a holder that is still delayed with the new job (debounce). */
  replace?: boolean
  /** Keep a holder that is still delayed, due the add's delay (0 when none) from now; ignored with `replace`. */
  reschedule?: boolean
  /** While the holder runs, keep the latest add as the id's next job, added when the holder ends for good. */
  keepLastIfActive?: boolean
}

/** The longest deduplication id accepted (it is part of a Redis key and a meta field). */
const MAX_ID_LENGTH = 512
/** The longest ttl: a year, as the longest delay. */
const MAX_TTL_MS = 365 * 24 * 3_600_000
const flag = (name: string) => (v: unknown) => {
  if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected deduplication.${name} to be true or false, got: ${describe(v)}`)
  return v
}

/** The `deduplication` option, validated (undefined for none); `debounce` is refused, as BullMQ 6.7 does. */
export function deduplicationOption(value: unknown, debounce: unknown): DeduplicationOptions | undefined {
  if (debounce !== undefined)
    fail('ERR_OPTIONS', 'the debounce option was removed in BullMQ 6; use deduplication: { id, ttl?, extend?, replace? }')
  if (value === undefined) return undefined
  const o = checkKnown('deduplication', value, ['id', 'ttl', 'extend', 'replace', 'reschedule', 'keepLastIfActive'])
  if (typeof o.id !== 'string' || o.id.length === 0 || o.id.length > MAX_ID_LENGTH)
    fail('ERR_OPTIONS', `expected deduplication.id to be a string of 1-${MAX_ID_LENGTH} characters, got: ${describe(o.id)}`)
  const ttl = opt(o.ttl, 0, (v) => checkInteger('deduplication.ttl', v, { min: 1, max: MAX_TTL_MS, unit: 'ms' }))
  const extend = opt(o.extend, false, flag('extend'))
  const replace = opt(o.replace, false, flag('replace'))
  const reschedule = opt(o.reschedule, false, flag('reschedule'))
  const keepLastIfActive = opt(o.keepLastIfActive, false, flag('keepLastIfActive'))
  return {
    id: o.id,
    ...(ttl > 0 ? { ttl } : {}),
    ...(extend ? { extend } : {}),
    ...(replace ? { replace } : {}),
    ...(reschedule ? { reschedule } : {}),
    ...(keepLastIfActive ? { keepLastIfActive } : {}),
  }
}

/**
 * The holder each deduplication id had when this Queue last saw it. The add script must be given the
 * holder's keys (to check it is alive, to replace it), so an add names the holder it expects; a wrong
 * guess is answered with the holder, and the add is sent again. A producer that adds the same ids again
 * guesses right, so a deduplicated add is one round trip, as BullMQ's. At most MAX_KNOWN ids, the oldest
 * forgotten first.
 */
export class KnownHolders {
  static readonly MAX_KNOWN = 10_000
  private readonly holders = new Map<string, string | null>()

  /** Sets the holder each job's call expects. */
  guess(jobs: { deduplication?: { spec: DeduplicationOptions; holder: string | null } }[]): void {
    for (const j of jobs) if (j.deduplication) j.deduplication.holder = this.holders.get(j.deduplication.spec.id) ?? null
  }

  /** What a call said of `id`'s holder (null: none). */
  learn(id: string, holder: string | null): void {
    this.holders.delete(id)
    this.holders.set(id, holder)
    if (this.holders.size > KnownHolders.MAX_KNOWN) this.holders.delete(this.holders.keys().next().value as string)
  }
}
