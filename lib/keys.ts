/**
 * Key layout. `{queue}` is a Redis Cluster hash tag, so every key of one queue lives in one slot and a
 * script may touch any of them. Only this module builds key strings.
 *
 *   <prefix>:{q}:wait       LIST   job ids; producers push left, workers take right, recoveries push right
 *   <prefix>:{q}:active     ZSET   in-flight job id -> lease deadline (ms, Redis clock): the lease index
 *   <prefix>:{q}:stalled    ZSET   marked job id -> time of the mark (ms, Redis clock)
 *   <prefix>:{q}:completed  ZSET   job id -> finish time (ms)
 *   <prefix>:{q}:failed     ZSET   job id -> finish time (ms)
 *   <prefix>:{q}:marker     ZSET   one member; idle workers block on it (BZPOPMIN) to wake on new work
 *   <prefix>:{q}:<id>       HASH   the job
 *   <prefix>:{q}:<id>:lock  STRING the lease: the owning worker's token, set with PX
 *   <prefix>:queues         SET    names of every queue created under this prefix (the reaper's registry)
 */
/** The queue's own keys; a job id may not take one of these names. */
export const QUEUE_KEY_NAMES = ['wait', 'active', 'stalled', 'completed', 'failed', 'marker'] as const

export interface QueueKeys {
  readonly wait: string
  readonly active: string
  readonly stalled: string
  readonly completed: string
  readonly failed: string
  readonly marker: string
  job(id: string): string
  lock(id: string): string
}

export function queueKeys(prefix: string, queue: string): QueueKeys {
  const base = `${prefix}:{${queue}}:`
  return {
    wait: `${base}wait`,
    active: `${base}active`,
    stalled: `${base}stalled`,
    completed: `${base}completed`,
    failed: `${base}failed`,
    marker: `${base}marker`,
    job: (id) => `${base}${id}`,
    lock: (id) => `${base}${id}:lock`,
  }
}

export function registryKey(prefix: string): string {
  return `${prefix}:queues`
}
