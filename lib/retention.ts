/**
 * Keeps the finished sets (`completed`, `failed`) within their retention: the oldest jobs past the
 * set's count or age are removed, in steps of at most TRIM_BATCH, each one script that re-checks the ids
 * it is given (lua/trim-2.lua), so the cost is the jobs removed. A worker trims when a finish reports
 * its set past the limits by another slack (about every tenth of the count, never per job), one trim per
 * set at a time (Trimmer); the sweep trims every set exactly to its limits.
 */
import defaults from './defaults.json' with { type: 'json' }
import { type FinishedSet, trim } from './redis/commands.js'
import type { RedisClient } from './redis/connection.js'
import type { QueueKeys } from './redis/keys.js'
import { oldestIds } from './redis/queries.js'

/**
 * The slack of the default count (1,000: lua/includes/retention.lua trimSlack), so a worker's trim is one step;
 * a finish's first ask for a trim sends at most as many of the set's oldest ids with it (finish-16.lua).
 */
const TRIM_BATCH = defaults.trimBatch

/**
 * Trims `set` to its limits; `first` are the oldest ids when the caller has read them. Returns how many
 * jobs it removed. `near`: stop once the set is near its limits (a worker's trim: the few jobs that finished while
 * it ran go with the next trim, rather than cost a read and a call of their own), else exactly to them.
 */
export async function trimFinished(
  client: RedisClient,
  keys: QueueKeys,
  set: FinishedSet,
  first?: string[],
  near = false,
): Promise<number> {
  let removed = 0
  let ids = first ?? (await oldestIds(client, keys[set], TRIM_BATCH))
  while (ids.length > 0) {
    const step = await trim(client, keys, set, ids)
    removed += step.removed
    if (step.done || (near && step.near) || step.removed === 0) break
    ids = await oldestIds(client, keys[set], TRIM_BATCH)
  }
  return removed
}

/**
 * A worker's trims: one per set at a time (a finish that asks while one runs adds nothing: the running
 * trim removes what is past the limits). Calls are tracked so close() waits for them; a failure is
 * reported unless the worker is closing (its connection goes on purpose: the next finish or sweep trims).
 */
export class Trimmer {
  private readonly running = new Set<FinishedSet>()

  constructor(
    private readonly client: RedisClient,
    private readonly keys: QueueKeys,
    private readonly track: (call: Promise<unknown>) => unknown,
    private readonly onError: (set: FinishedSet, err: unknown) => void,
  ) {}

  /** `oldest`: the set's oldest ids, when the finish that asked read them (no read of its own then). */
  request(set: FinishedSet, oldest?: string[]): void {
    if (this.running.has(set)) return
    this.running.add(set)
    this.track(
      trimFinished(this.client, this.keys, set, oldest, true)
        .catch((err: unknown) => this.onError(set, err))
        .finally(() => this.running.delete(set)),
    )
  }
}
