/**
 * Discovery: finds queues that need the reaper but are missing from the registry (lost to a Redis restart
 * without persistence, a failover to a replica that lacked the key, a deleted key), so the reaper never
 * stays blind to them. A queue needs the reaper when it has jobs in flight or marked, a dead worker's
 * reservations, delayed jobs or job schedulers to promote (with no worker left, the sweep is the only one
 * advancing a schedule), or jobs waiting, whose age the backlog alarm watches (SWEPT_KEY_NAMES in
 * lib/redis/keys.ts). A queue with only finished jobs needs no sweep and is not looked for.
 *
 * Cost: one SCAN pass visits every key of the database once (every master of a cluster), COUNT 1000 per
 * call, for at most `budgetMs` (1 s) a run, continuing where the last run stopped; the pattern returns only
 * keys under the prefix whose name after the queue's tag starts with an initial of those names (the keys of
 * jobs with numeric ids never match), so the replies stay small whatever the number of jobs. A pass runs
 * whenever the registry is empty, and once every DISCOVERY_INTERVAL_MS (an hour) for a registry that lost
 * only some queues (a queue is then found within the hour, plus the runs a large keyspace's pass spans).
 * The hour is kept in Redis (`<prefix>:discovered`, a key that expires an hour after a pass ended), so
 * reapers whose containers live less than an hour still scan hourly: a cold one reads how long the key
 * has left (one PTTL), a warm one counts down from it.
 * Queues found are registered again, so the next runs see them in the registry. (A queue with a live
 * Queue or Worker is registered again by them within a minute; discovery is for queues whose producers and
 * workers are gone with the registry.)
 */
import { isQueueName } from '../options.js'
import type { RedisClient } from '../redis/connection.js'
import { queueOfSweptKey } from '../redis/keys.js'
import { discoveryDueInMs, markDiscovered, scanNodes, scanSweptKeys } from '../redis/queries.js'
import { registerQueue } from '../registry.js'

const DISCOVERY_INTERVAL_MS = 60 * 60_000
const DISCOVERY_BUDGET_MS = 1_000
const SCAN_COUNT = 1_000

export class Discovery {
  /** Cursor per node of the pass in progress; undefined when no pass is in progress. */
  private cursors: Map<string, string> | undefined
  /** When the next pass is due (monotonic ms); undefined until read from Redis. */
  private due: number | undefined

  constructor(
    private readonly prefix: string,
    private readonly now: () => number = () => performance.now(),
    private readonly budgetMs = DISCOVERY_BUDGET_MS,
  ) {}

  /** Queues that need the reaper and that `registered` lacks (now registered again); [] when not due. */
  async missing(client: RedisClient, registered: readonly string[]): Promise<string[]> {
    const start = this.now()
    if (!this.cursors && registered.length > 0) {
      // How long ago any reaper last finished a pass: the key lives DISCOVERY_INTERVAL_MS after it.
      // Due here: another reaper may have scanned since, so ask again (one PTTL an hour).
      if (this.due !== undefined && start >= this.due) this.due = undefined
      this.due ??= start + (await discoveryDueInMs(client, this.prefix))
      if (start < this.due) return []
    }
    const nodes = scanNodes(client)
    this.cursors ??= new Map(nodes.map((_, i) => [String(i), '0']))
    const known = new Set(registered)
    const found = new Set<string>()
    for (const [i, node] of nodes.entries()) {
      let cursor = this.cursors.get(String(i))
      while (cursor !== undefined && this.now() - start < this.budgetMs) {
        const [next, keys] = await scanSweptKeys(node, this.prefix, cursor, SCAN_COUNT)
        for (const key of keys) {
          const queue = queueOfSweptKey(this.prefix, key)
          if (queue !== undefined && !known.has(queue) && isQueueName(queue)) found.add(queue)
        }
        cursor = next === '0' ? undefined : next
      }
      if (cursor === undefined) this.cursors.delete(String(i))
      else this.cursors.set(String(i), cursor)
    }
    if (this.cursors.size === 0) {
      this.cursors = undefined
      this.due = this.now() + DISCOVERY_INTERVAL_MS
      await markDiscovered(client, this.prefix, DISCOVERY_INTERVAL_MS)
    }
    for (const queue of found) await registerQueue(client, this.prefix, queue)
    return [...found].sort()
  }
}
