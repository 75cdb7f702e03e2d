/**
 * A producer that stops in the middle of a flow (it died between two levels of FlowProducer.add, or between
 * the two steps of Queue.add with `parent`) leaves parents waiting for children that were never written.
 * While it writes, each such parent is in its queue's `adding` set; the producer takes them out once every
 * child is written. A parent still there after the sweep's grace was left so: the sweep of its queue fails
 * each child that does not exist as failParentOnFailure would (the parent moves on and fails unrun, "child
 * <key> failed", the key in its `getDependencies().failed`), so no parent waits for ever.
 */
import { doneAdding, jobsExist, pendingChildren, settleChildren } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'

/** Fails the children never written of parents a producer left in `adding`; resolves to how many. */
export async function repairStoppedAdds(client: RedisClient, keys: QueueKeys, parentIds: string[]): Promise<number> {
  let failed = 0
  for (const id of parentIds) {
    const pending = await pendingChildren(client, keys, id)
    const exist = await jobsExist(client, pending)
    const missing = pending.filter((_, i) => !exist[i])
    if (missing.length > 0) {
      await settleChildren(
        client,
        keys,
        missing.map((childKey) => ({ parentId: id, childKey, outcome: 'fpof' as const, value: 'the producer stopped before adding it' })),
      )
      failed += missing.length
    }
    await doneAdding(client, keys, [id])
  }
  return failed
}
