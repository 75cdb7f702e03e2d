/**
 * A barrel: the plain Redis commands (no script) EchoMQ sends on its keys, one named function each,
 * re-exported so callers keep one import. With the script modules (commands.ts) this is the whole Redis
 * boundary: no other module sends a command on a queue's keys, so a change of the key layout touches
 * keys.ts, lib/redis/ and lua/.
 *   job-reads.ts        a queue's jobs: candidates, pages of ids, hashes, counts, logs, single-field writes
 *   scheduler-reads.ts  job schedulers as stored
 *   listening.ts        the events stream (XREAD BLOCK) and an idle worker's marker
 *   discovery.ts        the registry of queues, SCAN over the primaries, the discovery mark
 *   server.ts           the server's clock, eviction policy, ping, per-minute metrics
 */
export * from './discovery.js'
export * from './job-reads.js'
export * from './listening.js'
export * from './scheduler-reads.js'
export * from './server.js'
