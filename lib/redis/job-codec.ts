/**
 * The job hash's codec, the one place for it: how a job's options are written in its hash for the scripts
 * (encodeBackoff, encodeKeep, encodeOptions), the stored-option rule ("an option at its default is not
 * stored": storedOptionFields, hasDefaultOptions; add-7.lua applies it to what it is sent), the defaults as
 * the scripts read them (luaDefaults, prepended to every script by scripts.ts), and the hash read back into
 * a job's fields and its `opts` (fieldsFromHash, jobFromFields, jobOpts). A job added with the defaults
 * costs no byte for them.
 *
 * `job.opts`, BullMQ's: read back from what the hash stores, an absent field as the default. Two things are
 * derived rather than stored: `jobId` (the id, when the producer named the job: EchoMQ's own ids are
 * integers and a scheduler's runs are repeat:<id>:<ms>) and `timestamp` (createdOn). Differences from
 * BullMQ: `attempts` is the total in effect (BullMQ keeps what was given, 0 when none), and
 * `removeOnComplete`/`removeOnFail` say the retention in effect, EchoMQ's default included.
 */
import defaults from '../defaults.json' with { type: 'json' }
import type { JobFields, JobState } from '../job.js'
import { type Backoff, JOB_DEFAULTS, type JobOpts, type JobSettings, type Retention } from '../job-options.js'
import { isIterationId } from './iteration-id.js'

/** "<type>,<delay>,<maxDelay>,<jitter>" (maxDelay 0 for none), or "" for no backoff. */
export function encodeBackoff(b: Backoff | undefined): string {
  if (b === undefined) return ''
  if (typeof b === 'number') return b > 0 ? `fixed,${b},0,0` : ''
  return `${b.type},${b.delay ?? 0},${b.maxDelay ?? 0},${b.jitter ?? 0}`
}

/** "<count>,<age in s>" with a part empty for no limit, "0" to remove at once, "" to keep all. */
export function encodeKeep(r: Retention): string {
  if (r === true) return '0'
  if (r === false) return ''
  if (typeof r === 'number') return `${r},`
  if (r.count === 0) return '0'
  return r.count === undefined && r.age === undefined ? '' : `${r.count ?? ''},${r.age ?? ''}`
}

/** encodeBackoff read back; undefined for none (or a text it never wrote). */
function decodeBackoff(text: string | undefined): Backoff | undefined {
  const [type, delay, maxDelay, jitter] = (text ?? '').split(',')
  if (type === undefined || !/^[\w-]+$/.test(type) || delay === undefined) return undefined
  return {
    type,
    delay: Number(delay),
    ...(Number(maxDelay) > 0 ? { maxDelay: Number(maxDelay) } : {}),
    ...(Number(jitter) > 0 ? { jitter: Number(jitter) } : {}),
  }
}

/** encodeKeep read back: true (remove at once), false (keep all), a count, or { count?, age? }. */
function decodeKeep(text: string): Retention {
  if (text === '0') return true
  if (text === '') return false
  const [count = '', age = ''] = text.split(',')
  if (age === '') return Number(count)
  return { ...(count === '' ? {} : { count: Number(count) }), age: Number(age) }
}

/** A new job's options as add-7.lua takes them: encoded (encodeBackoff, encodeKeep), durations in ms. */
export interface EncodedOptions {
  attempts: number
  /** ms before the job may run; 0 for none. */
  delayMs: number
  /** Encoded backoff, "<type>,<delay>,<maxDelay>,<jitter>", or "" (see lua/includes/backoff.lua). */
  backoff: string
  /** Encoded retention in `completed` and in `failed` (see lua/includes/retention.lua). */
  keep: string
  keepFailed: string
  /** Log lines kept, or undefined for all. */
  keepLogs: number | undefined
  /** 0 for none, else 1 (highest) .. 2^21 - 1. */
  priority: number
  /** To the front of `wait` (a job without a priority). */
  lifo: boolean
  /** Stack traces kept (job.stacktrace). */
  stackTraceLimit: number
}

/** A job's options with its defaults applied, encoded for its hash. */
export function encodeOptions(s: JobSettings): EncodedOptions {
  return {
    attempts: s.attempts,
    delayMs: s.delay,
    backoff: encodeBackoff(s.backoff),
    keep: encodeKeep(s.removeOnComplete),
    keepFailed: encodeKeep(s.removeOnFail),
    keepLogs: s.keepLogs,
    priority: s.priority,
    lifo: s.lifo,
    stackTraceLimit: s.stackTraceLimit,
  }
}

/** The defaults (JOB_DEFAULTS) encoded as a job hash would hold them: what an absent field means. */
const STORED_DEFAULTS = encodeOptions(JOB_DEFAULTS)

/**
 * The stored-option rule, "an option at its default is not stored": each option field of a job hash, its
 * value as stored, and the value that leaves it out. In add-7.lua's order; the script applies the same
 * rule to what it is sent (its `put`), with the defaults luaDefaults declares.
 */
const STORED_FIELDS: [OptionField | 'attempts', (o: EncodedOptions) => string][] = [
  ['attempts', (o) => String(o.attempts)],
  ['backoff', (o) => o.backoff],
  ['keep', (o) => o.keep],
  ['keepFailed', (o) => o.keepFailed],
  ['keepLogs', (o) => (o.keepLogs === undefined ? '' : String(o.keepLogs))],
  ['priority', (o) => String(o.priority)],
  ['delay', (o) => String(o.delayMs)],
  ['lifo', (o) => (o.lifo ? '1' : '')],
  ['stackTraceLimit', (o) => String(o.stackTraceLimit)],
]
const DEFAULT_VALUES = STORED_FIELDS.map(([, value]) => value(STORED_DEFAULTS))

/** True when every option is at its default: a job hash then holds no option field (add-7.lua's short form). */
export function hasDefaultOptions(o: EncodedOptions): boolean {
  return STORED_FIELDS.every(([, value], i) => value(o) === DEFAULT_VALUES[i])
}

/** The option fields a job hash stores for `o`, name and value in turn: those not at their default. */
export function storedOptionFields(o: EncodedOptions): string[] {
  return STORED_FIELDS.flatMap(([field, value], i) => {
    const v = value(o)
    return v === DEFAULT_VALUES[i] ? [] : [field, v]
  })
}

/** The defaults as Lua constants: what a field absent from a job hash means. */
export function luaDefaults(): string {
  const { attempts, keep, keepFailed, stackTraceLimit } = STORED_DEFAULTS
  return [
    '-- Generated from lib/defaults.json (lib/redis/job-codec.ts): a job hash omits a field whose value is one of these;',
    '-- TRIM_BATCH is the most ids one trim step removes (lib/retention.ts).',
    `local DEFAULT_ATTEMPTS = ${attempts}`,
    `local DEFAULT_KEEP = { completed = '${keep}', failed = '${keepFailed}' }`,
    `local DEFAULT_STACK_TRACE_LIMIT = ${stackTraceLimit}`,
    `local DEFAULT_MAX_STALLED_COUNT = ${defaults.maxStalledCount}`,
    `local TRIM_BATCH = ${defaults.trimBatch}`,
    '',
  ].join('\n')
}

/** The option fields of a job hash, in the order takeJobs.lua's FIELD_AT lists them after `stacktrace`. */
const OPTION_FIELDS = ['backoff', 'keep', 'keepFailed', 'keepLogs', 'priority', 'stackTraceLimit', 'delay', 'lifo'] as const
export type OptionField = (typeof OPTION_FIELDS)[number]

/** Whether `id` was given by the producer: not an id EchoMQ numbered, nor a scheduler's run. */
function isCustomId(id: string): boolean {
  return `${Number.parseInt(id, 10)}` !== id && !isIterationId(id)
}

const num = (v: string | null | undefined) => (v == null || v === '' ? undefined : Number(v))

/** job.opts from a job's id, createdOn, attempts and its option fields (null or undefined: absent). */
export function jobOpts(id: string, createdOn: number, attempts: number, field: (name: OptionField) => string | null | undefined): JobOpts {
  const backoff = decodeBackoff(field('backoff') ?? undefined)
  const keep = field('keep')
  const keepFailed = field('keepFailed')
  const keepLogs = num(field('keepLogs'))
  const priority = num(field('priority'))
  const delay = num(field('delay'))
  return {
    attempts,
    ...(backoff === undefined ? {} : { backoff }),
    ...(delay === undefined ? {} : { delay }),
    ...(priority === undefined ? {} : { priority }),
    ...(field('lifo') === '1' ? { lifo: true } : {}),
    ...(isCustomId(id) ? { jobId: id } : {}),
    timestamp: createdOn,
    removeOnComplete: keep == null ? JOB_DEFAULTS.removeOnComplete : decodeKeep(keep),
    removeOnFail: keepFailed == null ? JOB_DEFAULTS.removeOnFail : decodeKeep(keepFailed),
    ...(keepLogs === undefined ? {} : { keepLogs }),
    stackTraceLimit: num(field('stackTraceLimit')) ?? JOB_DEFAULTS.stackTraceLimit,
  }
}

function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const optionalNumber = (v: string | undefined) => (v === undefined ? undefined : Number(v))

/** The fields of a job from HGETALL output (an object, or the flat field/value list a script returns). */
export function fieldsFromHash(id: string, hash: Record<string, string> | string[]): JobFields {
  const h: Record<string, string> = {}
  if (Array.isArray(hash)) {
    for (let i = 0; i + 1 < hash.length; i += 2) h[hash[i] as string] = hash[i + 1] as string
  } else Object.assign(h, hash)
  const attempts = Number(h.attempts ?? JOB_DEFAULTS.attempts)
  const createdOn = Number(h.createdOn ?? 0)
  const job: JobFields = {
    id,
    name: h.name ?? '',
    data: parseJson(h.data),
    attempts,
    // A completed job's hash has no attemptsMade after a first attempt, nor a null result (finish-16.lua).
    attemptsMade: Number(h.attemptsMade ?? (h.state === 'completed' ? 1 : 0)),
    attemptsStarted: startsOf(h.token, h.attemptsStarted),
    state: (h.state ?? 'wait') as JobState,
    createdOn,
    stacktrace: stacksOf(h.stacktrace),
    opts: jobOpts(id, createdOn, attempts, (f) => h[f]),
  }
  if (h.failedReason !== undefined) job.failedReason = h.failedReason
  if (h.lastError !== undefined) job.lastError = h.lastError
  if (h.returnValue !== undefined) job.returnValue = parseJson(h.returnValue)
  else if (h.state === 'completed') job.returnValue = null
  const startedOn = optionalNumber(h.startedOn)
  if (startedOn !== undefined) job.startedOn = startedOn
  const finishedOn = optionalNumber(h.finishedOn)
  if (finishedOn !== undefined) job.finishedOn = finishedOn
  const dueAt = optionalNumber(h.dueAt)
  if (dueAt !== undefined && job.state === 'delayed') job.dueAt = dueAt
  const lastDelay = optionalNumber(h.lastDelay)
  if (lastDelay !== undefined && job.state === 'delayed') job.lastDelay = lastDelay
  if (h.workerName !== undefined) job.workerName = h.workerName
  const retried = optionalNumber(h.retried)
  if (retried !== undefined) job.retried = retried
  if (h.progress !== undefined) job.progress = parseJson(h.progress)
  if (h.priority !== undefined) job.priority = Number(h.priority)
  if (h.repeatJobKey !== undefined) job.repeatJobKey = h.repeatJobKey
  if (h.stalledCounter !== undefined) job.stalledCounter = Number(h.stalledCounter)
  if (h.deid !== undefined) job.deduplicationId = h.deid
  withFlowFields(job, h.parentKey, h.parent, h.defa)
  return job
}

/**
 * Times the job was taken: the start number in its run's token, its finish's receipt or a sweep's mark ("<worker>:<n>",
 * "=<worker>:<n>..."), else the `attemptsStarted` field a move that cleared the token wrote (lua/includes/starts.lua).
 */
function startsOf(token: string | undefined, field: string | undefined): number {
  const n = token === undefined ? undefined : /:(\d+)/.exec(token)?.[1]
  return Number(n ?? field ?? 0)
}

/** The `stacktrace` field (a JSON array a script wrote), or [] without one. */
function stacksOf(text: string | null | undefined): string[] {
  if (text == null) return []
  const list = parseJson(text)
  return Array.isArray(list) ? list.map(String) : []
}

/** BullMQ's `job.parent`: the parent's id and queue (`queueKey`, its qualified name), and the child's failure policy. */
export interface ParentRef {
  id: string
  queueKey: string
  fpof?: boolean
  cpof?: boolean
  idof?: boolean
  rdof?: boolean
}

/** The policy flags of `parent` as job.opts names them (BullMQ's options). */
const POLICY_OPTIONS = [
  ['fpof', 'failParentOnFailure'],
  ['cpof', 'continueParentOnFailure'],
  ['idof', 'ignoreDependencyOnFailure'],
  ['rdof', 'removeDependencyOnFailure'],
] as const

/** A flow's child: its `parentKey` and `parent` fields decoded onto `job` (and job.opts' parent and policy); a deferred failure. */
export function withFlowFields(
  job: JobFields,
  parentKey: string | null | undefined,
  parent: string | null | undefined,
  defa?: string | null,
) {
  if (defa != null) job.deferredFailure = defa
  if (parentKey == null) return
  job.parentKey = parentKey
  const ref = parseJson(parent ?? undefined) as ParentRef | undefined
  if (ref === undefined || typeof ref !== 'object') return
  job.parent = ref
  const opts = job.opts as JobOpts & Record<string, unknown>
  opts.parent = { id: ref.id, queue: ref.queueKey }
  for (const [flag, name] of POLICY_OPTIONS) if (ref[flag]) opts[name] = true
}

/** Where the option fields start in takeJobs.lua's FIELD_AT (0-based). */
const OPTION_AT = 10
/** Where `attemptsStarted` is in takeJobs.lua's FIELD_AT (0-based): the start number of a run just taken (absent: 1). */
export const ATTEMPTS_STARTED_AT = 3
/** Where `deid` is in takeJobs.lua's FIELD_AT (0-based): after the option fields. */
const DEID_AT = OPTION_AT + OPTION_FIELDS.length
/** Where takeJobs.lua's reply puts a run's startedOn when it is not the call's time (the token's place). */
export const STARTED_ON_AT = DEID_AT + 4
/** Where `deps` is in takeJobs.lua's FIELD_AT (0-based): after the token's place, so the fields before kept their letters. */
const DEPS_AT = STARTED_ON_AT + 1
/** Where `stalledCounter` is in takeJobs.lua's FIELD_AT (0-based): after deps (a job that stalled has one). */
const STALLED_AT = DEPS_AT + 1
/** Where `repeatJobKey` is in takeJobs.lua's FIELD_AT (0-based): after stalledCounter (a job scheduler's run has one). */
const REPEAT_AT = STALLED_AT + 1

/** Where `createdOn` is in takeJobs.lua's FIELD_AT (0-based). */
export const CREATED_ON_AT = 2

/**
 * createdOn as takeJobs.lua's replyFields sends it against the call's time (`now`, its text): digits
 * shorter than it are its last ones (the first are now's), "=" starts a whole value shorter than it, ""
 * (or nothing) is none.
 */
function createdOnOf(sent: string | null | undefined, now: string): number {
  if (sent == null || sent === '') return 0
  if (sent.startsWith('=')) return Number(sent.slice(1))
  return Number(sent.length < now.length ? now.slice(0, now.length - sent.length) + sent : sent)
}

/**
 * Whether a finish of a run of this job (its fields as taken, as jobFromFields reads them) needs to read
 * only its token: it has none of attemptsMade, keep, deid and parentKey (finish-16.lua's "plain" run).
 */
export function plainRun(f: (string | null)[]): boolean {
  return f[5] == null && f[OPTION_AT + OPTION_FIELDS.indexOf('keep')] == null && f[DEID_AT] == null && f[DEID_AT + 1] == null
}

/**
 * Whether the job of a run (its fields as taken) is a flow's parent, its hash's `deps`: a finish that may
 * remove it at once sends its four flow keys, to go with it (finish-16.lua's "&").
 */
export function parentRun(f: (string | null)[]): boolean {
  return f[DEPS_AT] != null
}

/**
 * Builds a Job just taken from takeJobs.lua's reply: its FIELD_AT fields in order (name, data, createdOn,
 * attemptsStarted, attempts, attemptsMade, lastError, retried, progress, stacktrace, then the option
 * fields of OPTION_FIELDS, then deid, parentKey, parent and a deferred failure (the token's place and deps
 * after them are read by the caller: STARTED_ON_AT, parentRun); null, or past the end, for
 * a field the hash lacks), with createdOn against `now` (the call's time, as text: createdOnOf) and
 * attemptsStarted absent for 1, and what the take set (active, since `startedOn`, by `workerName`). Decoded without a detour
 * through an object, as a busy worker does this for every job.
 */
export function jobFromFields(id: string, f: (string | null)[], now: string, startedOn: number, workerName: string): JobFields {
  const attempts = f[4] == null ? JOB_DEFAULTS.attempts : Number(f[4])
  const createdOn = createdOnOf(f[CREATED_ON_AT], now)
  const job: JobFields = {
    id,
    name: f[0] ?? '',
    data: parseJson(f[1] ?? undefined),
    attempts,
    attemptsMade: f[5] == null ? 0 : Number(f[5]),
    attemptsStarted: f[ATTEMPTS_STARTED_AT] == null ? 1 : Number(f[ATTEMPTS_STARTED_AT]),
    state: 'active',
    createdOn,
    startedOn,
    workerName,
    stacktrace: stacksOf(f[9]),
    opts: jobOpts(id, createdOn, attempts, (name) => f[OPTION_AT + OPTION_FIELDS.indexOf(name)]),
  }
  const priority = f[OPTION_AT + OPTION_FIELDS.indexOf('priority')]
  if (priority != null) job.priority = Number(priority)
  if (f[6] != null) job.lastError = f[6]
  if (f[7] != null) job.retried = Number(f[7])
  if (f[8] != null) job.progress = parseJson(f[8])
  if (f[DEID_AT] != null) job.deduplicationId = f[DEID_AT] as string
  if (f[STALLED_AT] != null) job.stalledCounter = Number(f[STALLED_AT])
  if (f[REPEAT_AT] != null) job.repeatJobKey = f[REPEAT_AT] as string
  withFlowFields(job, f[DEID_AT + 1], f[DEID_AT + 2], f[DEID_AT + 3])
  return job
}
