/**
 * The reads of the dashboard's operator view that touch a queue's keys, each bounded by a count given by
 * the caller, and all on what EchoMQ already stores (nothing is written for them, no byte per job):
 *
 * - who holds the jobs in flight: the first `n` ids of the lease index (`active`, by lease deadline, so
 *   lapsed leases first), each job's `workerName` (stamped by the take) and whether its lease key lives;
 * - how long recent jobs waited and ran: the newest `n` ids of `completed` and of `failed` that finished
 *   since `since`, each job's `createdOn`, `waitingSince` (when it last joined the line, absent when that
 *   was its creation), `startedOn` and `finishedOn`.
 */
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'

export interface Holder {
  id: string
  /** The worker that took the job last (its `name` option). */
  workerName: string | undefined
  /** The lease key is there (the worker renews it). */
  live: boolean
}

/** Up to `n` in-flight jobs, lapsed leases first, with their worker and lease. */
export async function leaseHolders(client: RedisClient, keys: QueueKeys, n: number): Promise<Holder[]> {
  const ids = await client.zrange(keys.active, '0', String(n - 1))
  return Promise.all(
    ids.map(async (id) => {
      const [workerName, live] = await Promise.all([client.hget(keys.job(id), 'workerName'), client.exists(keys.lock(id))])
      return { id, workerName: workerName ?? undefined, live: live === 1 }
    }),
  )
}

export interface RunTimes {
  /** When it joined the line last (ms, Redis's clock). */
  readyAt: number
  startedOn: number
  finishedOn: number
}

/** Up to `n` of the newest completed and `n` of the newest failed jobs finished since `since` (ms), with their times. */
export async function recentRunTimes(client: RedisClient, keys: QueueKeys, since: number, n: number): Promise<RunTimes[]> {
  const [completed, failed] = await Promise.all(
    [keys.completed, keys.failed].map((set) => client.zrevrangebyscore(set, '+inf', String(since), 'LIMIT', 0, n)),
  )
  const rows = await Promise.all(
    [...(completed ?? []), ...(failed ?? [])].map((id) =>
      client.hmget(keys.job(id), 'createdOn', 'waitingSince', 'startedOn', 'finishedOn'),
    ),
  )
  const out: RunTimes[] = []
  for (const [created, waiting, started, finished] of rows) {
    const readyAt = Number(waiting ?? created)
    const startedOn = Number(started)
    const finishedOn = Number(finished)
    if (Number.isFinite(readyAt) && Number.isFinite(startedOn) && Number.isFinite(finishedOn) && started && finished) {
      out.push({ readyAt, startedOn, finishedOn })
    }
  }
  return out
}
