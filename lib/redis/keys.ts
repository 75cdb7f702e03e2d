/**
 * Key layout. `{queue}` is a Redis Cluster hash tag, so every key of one queue lives in one slot and a
 * script may touch any of them. Only this module builds key strings.
 *
 *   <prefix>:{q}:wait       LIST   job ids; producers push left, workers take right, recoveries push right
 *   <prefix>:{q}:active     ZSET   in-flight job id -> lease deadline (ms, Redis clock): the lease index
 *   <prefix>:{q}:stalled    ZSET   marked job id -> time of the mark (ms, Redis clock)
 *   <prefix>:{q}:delayed    ZSET   job id -> due time (ms, Redis clock): delayed jobs and retries in backoff
 *   <prefix>:{q}:completed  ZSET   job id -> finish time (ms)
 *   <prefix>:{q}:failed     ZSET   job id -> finish time (ms)
 *   <prefix>:{q}:marker     ZSET   idle workers block on it (BZPOPMIN): '0' (score 0) when `wait` has work,
 *                                  'd' scored with the earliest due time of a delayed job
 *   <prefix>:{q}:meta       HASH   the queue's state and settings, one field each
 *                                  (test/redis/keys.test.ts checks this list against what the code writes):
 *                                  `paused` (pause-6.lua), `limitedUntil` (rate limited until, ms, Redis
 *                                  clock: limit-1.lua), `pc` (the priority counter, enter.lua), `ids` (the
 *                                  counter of generated job ids), `failedNew` (jobs that entered the failed
 *                                  set, not yet claimed by the reaper), `failedClaim` / `failedClaimed` /
 *                                  `failedClaimUntil` (a reaper invocation's claim on them until it published
 *                                  them, lua/claim-1.lua), `keepCompleted` / `keepFailed` (the sets'
 *                                  retention limits), `maxStalledCount` and `maxLenEvents` (the workers' and
 *                                  the queue's settings the scripts read), `de:<did>` (a deduplication id
 *                                  held without a ttl: the holder's job id; with them `de`, a note long
 *                                  enough to keep meta a hash table), `dn:<did>` (the id's next job, stored
 *                                  by an add while the holder ran: keepLastIfActive, lua/includes/nextJob.lua;
 *                                  `nexts` '1' for good once one was: finishes then ask for them),
 *                                  `parents` (how many of the queue's
 *                                  jobs hold flow keys, their hash's field deps: while above 0, trim-2.lua
 *                                  looks for them among the jobs it removes; dropped at 0, never negative:
 *                                  lua/includes/parents.lua), `flows` (legacy, written only by earlier
 *                                  versions, which did not count parents: '1' once a job became a parent;
 *                                  read, never written or cleared: its queue's trims look for parents for
 *                                  good), `adopted` (an unfinished job joined a parent, or one that may
 *                                  run became a parent: no finish reads a run as plain), `concurrency`,
 *                                  `max`, `duration` (the global limits, BullMQ's names: queue/global-limits.ts,
 *                                  read by each take, lua/includes/takeJobs.lua admission)
 *   <prefix>:{q}:reserved   ZSET   job id -> reservation expiry (ms, Redis clock): waiting jobs a busy worker
 *                                  popped from `wait` for its next calls to take
 *   <prefix>:{q}:events     STREAM the queue's events (QueueEvents), written only while `listened` exists
 *   <prefix>:{q}:listened   ZSET   listening QueueEvents: listener id -> when its mark ends (ms, Redis clock);
 *                                  the key expires with the latest mark (lua/listen-1.lua)
 *   <prefix>:{q}:metrics    HASH   finished jobs per minute over the last hour (lua/includes/minutes.lua)
 *   <prefix>:{q}:prioritized ZSET  waiting jobs with a priority: id -> priority * 2^32 + counter (enter.lua)
 *   <prefix>:{q}:reservedScores HASH reserved id -> its score in `prioritized`, to hand it back to its place
 *   <prefix>:{q}:limiter    ZSET   job id:start number -> start time (ms): the worker limiters' window
 *   <prefix>:{q}:stalled-check STRING set with PX stalledInterval by the worker that runs the stalled sweep
 *                                  (BullMQ's name): one worker of the queue sweeps per interval
 *   <prefix>:{q}:schedulers ZSET   job scheduler id -> when its next period is due (ms)
 *   <prefix>:{q}:schedulers:<sid> HASH a job scheduler: its timing, the template of its jobs, `ic` (runs
 *                                  made) and `last` (its newest run's due time); a run is a job with id
 *                                  repeat:<sid>:<due ms> (lua/includes/iteration.lua)
 *   <prefix>:{q}:invocations ZSET  worker-function invocations (echomq/lambda): id -> lease end (ms, Redis
 *                                  clock); the reaper counts the live ones (lua/invocation-1.lua)
 *   <prefix>:{q}:waiting-children ZSET parent job id -> when it began to wait (ms): jobs waiting for their
 *                                  children (flows, BullMQ's name)
 *   <prefix>:{q}:handoffs   HASH   the flows' outbox: child job id -> what a child's final outcome tells its
 *                                  parent (JSON: the parent's key, the outcome, the value, the policy),
 *                                  written by the script that ended the child, removed once the parent's
 *                                  queue recorded it (lib/flows/handoffs.ts; lua/settleChild-9.lua)
 *   <prefix>:{q}:adding     ZSET   flow parent id -> when its producer began writing its children (ms, Redis
 *                                  clock), until it wrote them all (lib/flows/adding.ts: the sweep fails the
 *                                  children of a producer that stopped)
 *   <prefix>:{q}:<id>       HASH   the job (an id holds ':' only as three parts, lib/options.ts: so <id> never
 *                                  meets another job's <id>:lock or <id>:logs, and the tag stays the queue's)
 *   <prefix>:{q}:<id>:lock  STRING the lease: the owning worker's token, set with PX
 *   <prefix>:{q}:<id>:logs  LIST   the job's log lines (job.log), deleted with the job
 *   <prefix>:{q}:<id>:dependencies SET a parent's children not yet settled: their job keys (BullMQ's name)
 *   <prefix>:{q}:<id>:processed HASH a parent's completed children: job key -> return value (JSON)
 *   <prefix>:{q}:<id>:failed HASH  a parent's children whose failure was ignored (ignoreDependencyOnFailure,
 *                                  continueParentOnFailure): job key -> failed reason
 *   <prefix>:{q}:<id>:unsuccessful ZSET a parent's children that failed it (failParentOnFailure): job key ->
 *                                  when (ms)
 *   <prefix>:{q}:de:<did>   STRING a deduplication id held with a ttl: the holder's job id, PX ttl
 *                                  (held without a ttl: meta's field `de:<did>`; lua/includes/deduplicate.lua)
 *   <prefix>:queues         SET    names of every queue created under this prefix (the reaper's registry)
 *   <prefix>:discovered     STRING set for DISCOVERY_INTERVAL_MS when a reaper's discovery finished a pass:
 *                                  while it lives, no reaper (cold or warm) scans again
 */
/** The queue's own keys; a job id may not take one of these names. */
export const QUEUE_KEY_NAMES = [
  'wait',
  'active',
  'stalled',
  'delayed',
  'completed',
  'failed',
  'marker',
  'meta',
  'reserved',
  'events',
  'listened',
  'metrics',
  'prioritized',
  'reservedScores',
  'limiter',
  'schedulers',
  'stalled-check',
  'invocations',
  'waiting-children',
  'handoffs',
  'adding',
] as const

export interface QueueKeys {
  readonly wait: string
  readonly active: string
  readonly stalled: string
  readonly completed: string
  readonly failed: string
  readonly delayed: string
  readonly marker: string
  readonly meta: string
  readonly reserved: string
  readonly events: string
  readonly listened: string
  readonly metrics: string
  readonly prioritized: string
  readonly reservedScores: string
  readonly limiter: string
  readonly schedulers: string
  readonly stalledCheck: string
  readonly invocations: string
  readonly waitingChildren: string
  readonly handoffs: string
  readonly adding: string
  scheduler(id: string): string
  job(id: string): string
  lock(id: string): string
  logs(id: string): string
  /** A deduplication id held with a ttl (no job id starts with "de:": custom ids have no ':', a scheduler's start "repeat:"). */
  deduplication(id: string): string
  /** A parent's children not yet settled, completed, ignored-failed and failing (BullMQ's names). */
  dependencies(id: string): string
  processed(id: string): string
  failedChildren(id: string): string
  unsuccessful(id: string): string
}

export function queueKeys(prefix: string, queue: string): QueueKeys {
  const base = `${prefix}:{${queue}}:`
  return {
    wait: `${base}wait`,
    active: `${base}active`,
    stalled: `${base}stalled`,
    completed: `${base}completed`,
    failed: `${base}failed`,
    delayed: `${base}delayed`,
    marker: `${base}marker`,
    meta: `${base}meta`,
    reserved: `${base}reserved`,
    events: `${base}events`,
    listened: `${base}listened`,
    metrics: `${base}metrics`,
    prioritized: `${base}prioritized`,
    reservedScores: `${base}reservedScores`,
    limiter: `${base}limiter`,
    schedulers: `${base}schedulers`,
    stalledCheck: `${base}stalled-check`,
    invocations: `${base}invocations`,
    waitingChildren: `${base}waiting-children`,
    handoffs: `${base}handoffs`,
    adding: `${base}adding`,
    scheduler: (id) => `${base}schedulers:${id}`,
    job: (id) => `${base}${id}`,
    lock: (id) => `${base}${id}:lock`,
    logs: (id) => `${base}${id}:logs`,
    deduplication: (id) => `${base}de:${id}`,
    dependencies: (id) => `${base}${id}:dependencies`,
    processed: (id) => `${base}${id}:processed`,
    failedChildren: (id) => `${base}${id}:failed`,
    unsuccessful: (id) => `${base}${id}:unsuccessful`,
  }
}

/** A flow's parent's four keys, in the order the scripts take them: dependencies, processed, failed, unsuccessful. */
export const flowKeys = (k: QueueKeys, id: string): string[] => [
  k.dependencies(id),
  k.processed(id),
  k.failedChildren(id),
  k.unsuccessful(id),
]

/** `<prefix>:{q}`: BullMQ's qualifiedName of a queue, and the `queueKey` of a parent in a child's hash. */
export function qualifiedName(prefix: string, queue: string): string {
  return `${prefix}:{${queue}}`
}

/** The qualified name of the queue whose keys these are. */
export function qualifiedNameOf(keys: QueueKeys): string {
  return keys.job('').slice(0, -1)
}

/**
 * A job's key (`<prefix>:{q}:<id>`) or a queue's qualified name (`<prefix>:{q}`, id '') taken apart; undefined
 * for text of another form. A prefix and a queue name hold no brace, so the first `:{` and the `}` after it
 * are the tag's.
 */
export function parseJobKey(key: string): { prefix: string; queue: string; id: string } | undefined {
  const open = key.indexOf(':{')
  const close = open < 0 ? -1 : key.indexOf('}', open + 2)
  if (open < 1 || close < 0) return undefined
  const rest = key.slice(close + 1)
  if (rest !== '' && !rest.startsWith(':')) return undefined
  return { prefix: key.slice(0, open), queue: key.slice(open + 2, close), id: rest.slice(1) }
}

export function registryKey(prefix: string): string {
  return `${prefix}:queues`
}

export function discoveryKey(prefix: string): string {
  return `${prefix}:discovered`
}

const escapeGlob = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&')

/**
 * The keys whose presence says a queue needs the reaper: jobs in flight or marked (`active`, `stalled`), a
 * dead worker's reservations (`reserved`), jobs to promote (`delayed`, `schedulers`: a schedule advances
 * only when someone promotes it), and jobs waiting for a worker (`wait`, `prioritized`), whose age the
 * backlog alarm watches, and `handoffs`: a flow's child outcomes not yet told to their parents (a worker
 * died between the two steps), which the sweep delivers, and `adding`: flows a producer is writing (or
 * stopped writing). A queue with finished jobs only needs no sweep.
 */
const SWEPT_KEY_NAMES = ['active', 'stalled', 'reserved', 'delayed', 'schedulers', 'wait', 'prioritized', 'handoffs', 'adding'] as const

/**
 * A SCAN pattern for those keys of every queue under `prefix`: the name after the queue's tag starts with one
 * of their initials, so the keys of jobs with numeric ids (hash, lease, logs) never match; a job named with
 * such a letter does, and `queueOfSweptKey` leaves it out.
 */
export function sweptKeyPattern(prefix: string): string {
  const initials = [...new Set(SWEPT_KEY_NAMES.map((name) => name[0]))].sort().join('')
  return `${escapeGlob(prefix)}:{*}:[${initials}]*`
}

/** The queue that `key` says needs the reaper (one of SWEPT_KEY_NAMES under `prefix`), else undefined. */
export function queueOfSweptKey(prefix: string, key: string): string | undefined {
  const head = `${prefix}:{`
  if (!key.startsWith(head)) return undefined
  // A queue name holds no brace, so the first `}:` closes the tag.
  const close = key.indexOf('}:', head.length)
  if (close < 0) return undefined
  const name = key.slice(close + 2)
  return (SWEPT_KEY_NAMES as readonly string[]).includes(name) ? key.slice(head.length, close) : undefined
}

/** A SCAN pattern matching the deduplication ids a queue holds with a ttl (`keys.deduplication`). */
export function deduplicationPattern(keys: QueueKeys): string {
  return `${escapeGlob(keys.deduplication(''))}*`
}

/** A SCAN pattern matching every key under `prefix`. */
export function prefixPattern(prefix: string): string {
  return `${escapeGlob(prefix)}:*`
}
