/**
 * queue.getWorkers() as BullMQ 6.7 answers it: the connections of this queue's workers, one per worker
 * (its blocking connection, named `<prefix>:<base64(queue)>:w:<worker name>`, lib/redis/clients.ts), each
 * as CLIENT LIST shows it (`id`, `addr`, `age`, `idle`... as strings) with `name` set to the queue's name
 * and `rawname` to the connection's name. On a cluster every primary is asked and, as BullMQ does, the
 * node with the most answers (see workersIn).
 *
 * Where BullMQ differs on purpose: a Redis that refuses CLIENT LIST (ElastiCache Serverless restricts the
 * CLIENT commands; an ACL without +client|list) makes BullMQ answer one made-up worker
 * (`{ name: 'GCP does not support client list' }`) or throw; EchoMQ throws an EchoMQError saying so, since
 * a made-up worker counts as one (getWorkersCount() = 1) where nobody may be running.
 */
import { EchoMQError } from '../errors.js'
import { clientLists, decodeName, parseClientList, queueClientName } from '../redis/clients.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueCore } from './core.js'

export type WorkerConnection = Record<string, string>

/** What to do when CLIENT LIST is refused (also the dashboard's note). */
export const CLIENT_LIST_HINT =
  'this Redis refuses CLIENT LIST: managed services restrict it (ElastiCache Serverless restricts the CLIENT commands), ' +
  'and an ACL must grant +client|list (it is in @dangerous and @admin). Workers holding jobs are still seen by their leases'

function clientListRefused(queue: string, err: unknown): EchoMQError {
  const message = err instanceof Error ? err.message : String(err)
  return new EchoMQError(/NOPERM/.test(message) ? 'ERR_NOPERM' : 'ERR_REDIS', `list the workers of queue ${queue}: ${message}`, {
    cause: err,
    hint: CLIENT_LIST_HINT,
  })
}

/**
 * The worker connections of `queue` in CLIENT LIST texts (one per node). On a cluster, the node with the
 * most of them (BullMQ's rule): every worker waits (BZPOPMIN) on the node of the queue's slot, while its
 * cluster client also opens a connection, named alike, to a random node for its ready check. In a tie
 * the node where more of them wait for work wins.
 */
export function workersIn(lists: string[], prefix: string, queue: string): WorkerConnection[] {
  const base = queueClientName(prefix, queue)
  let best: WorkerConnection[] = []
  let bestWaiting = -1
  for (const list of lists) {
    const found: WorkerConnection[] = []
    for (const entry of parseClientList(list)) {
      const raw = entry.name ?? ''
      if (raw === base || raw.startsWith(`${base}:w:`)) found.push({ ...entry, name: queue, rawname: raw })
    }
    const waiting = found.filter((c) => c.cmd === 'bzpopmin').length
    if (found.length > best.length || (found.length === best.length && waiting > bestWaiting)) {
      best = found
      bestWaiting = waiting
    }
  }
  return best
}

/** The worker's own name, from its connection's (`rawname`); undefined for an unnamed BullMQ worker. */
export function workerNameOf(rawname: string, prefix: string, queue: string): string | undefined {
  const base = `${queueClientName(prefix, queue)}:w:`
  return rawname.startsWith(base) ? decodeName(rawname.slice(base.length)) : undefined
}

async function getWorkers(client: RedisClient, prefix: string, queue: string): Promise<WorkerConnection[]> {
  let lists: string[]
  try {
    lists = await clientLists(client)
  } catch (err) {
    if (err instanceof Error && err.name === 'ReplyError') throw clientListRefused(queue, err)
    throw err
  }
  return workersIn(lists, prefix, queue)
}

/** Queue.getWorkers: this queue's workers, through the queue's call (ERR_CLOSED when it closes first). */
export async function queueWorkers(q: QueueCore): Promise<WorkerConnection[]> {
  q.assertOpen()
  return q.call('list the workers of queue', () => getWorkers(q.client, q.settings.prefix, q.name))
}
