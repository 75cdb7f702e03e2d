/**
 * What the operator view reads, besides the queues: the workers, Redis's health, and how long recent
 * jobs waited and ran. Nothing here is written by a worker or a job for the dashboard's sake:
 *
 * - Workers are their named blocking connections (CLIENT LIST of every primary, lib/redis/clients.ts):
 *   an idle worker is seen with no command of its own; `last seen` is when its connection last sent a
 *   command (an idle worker's wait for work is renewed every 60 s; a busy one is seen by its live leases).
 *   Jobs in flight come from the lease index (`active`, the first ACTIVE_SAMPLE of each queue) and the
 *   `workerName` each take stamps on its job; a worker holding jobs with no connection left is listed
 *   as gone. A Redis that refuses CLIENT LIST (ElastiCache Serverless, an ACL without +client|list) is
 *   said so: workers are then known only by the jobs they hold, and no queue is flagged as having none.
 * - Redis's health is INFO server and memory of every primary: version, used memory, maxmemory and the
 *   policy; any policy but `noeviction` lets Redis delete keys under memory pressure (a lease, a job).
 */
import { CLIENT_LIST_HINT, type WorkerConnection, workerNameOf, workersIn } from '../queue/workers.js'
import { clientLists, serverInfos } from '../redis/clients.js'
import { queueKeys } from '../redis/keys.js'
import { leaseHolders } from '../redis/operator-reads.js'
import type { QueueSet } from './read.js'

/** In-flight jobs read per queue to attribute them to workers (lapsed leases first). */
const ACTIVE_SAMPLE = 1_000

export interface WorkerRow {
  queue: string
  /** The worker's `name` option (`<hostname>:<pid>` by default). */
  name: string
  /** Where its connections come from, as Redis sees them (addresses, NAT included). */
  hosts: string[]
  /** Its open connections (two workers sharing a name share a row). */
  connections: number
  /**
   * Jobs it holds (from the first ACTIVE_SAMPLE of the lease index), and how many of their leases lapsed;
   * the others are live: their worker renewed them within the lease (it runs, though busy).
   */
  inFlight: number
  lapsed: number
  /** ms, Redis's clock: its connection's last command; undefined when no connection is seen (gone, or CLIENT LIST refused). */
  lastSeen: number | undefined
}

export interface Presence {
  /** Why CLIENT LIST could not be read (then only workers holding jobs are known). */
  refused: string | undefined
  rows: WorkerRow[]
  /** Connected workers per queue (absent: unknown, CLIENT LIST refused). */
  connected: Map<string, number>
}

/**
 * How long what CLIENT LIST said is kept: every page and every live refresh of every open tab asks, and
 * CLIENT LIST costs Redis a line per connection; a worker shown a few seconds late is no loss.
 */
export const CLIENT_LIST_TTL_MS = 3_000

type ClientLists = { lists: string[] } | { refused: string }

/** Per dashboard (its QueueSet): the last CLIENT LIST read or under way, and when it was asked (set.clock). */
const kept = new WeakMap<QueueSet, { at: number; reading: Promise<ClientLists> }>()

/** CLIENT LIST of every primary, kept CLIENT_LIST_TTL_MS; a read that failed is not kept. */
function readClientLists(set: QueueSet): Promise<ClientLists> {
  const now = set.clock.now()
  const last = kept.get(set)
  if (last && now - last.at < CLIENT_LIST_TTL_MS) return last.reading
  const entry = { at: now, reading: askClientLists(set) }
  kept.set(set, entry)
  entry.reading.catch(() => kept.get(set) === entry && kept.delete(set))
  return entry.reading
}

async function askClientLists(set: QueueSet): Promise<ClientLists> {
  try {
    return { lists: await clientLists(set.client) }
  } catch (err) {
    if (!(err instanceof Error) || err.name !== 'ReplyError') throw err
    return { refused: `CLIENT LIST was refused (${err.message}): ${CLIENT_LIST_HINT}` }
  }
}

const hostOf = (addr: string | undefined) => (addr ?? '').replace(/:\d+$/, '')

/** Connected workers per queue: one CLIENT LIST per primary for every queue shown. */
export async function readConnected(set: QueueSet, names: string[]): Promise<Presence> {
  const listed = await readClientLists(set)
  if ('refused' in listed) return { refused: listed.refused, rows: [], connected: new Map() }
  const connected = new Map<string, number>()
  for (const name of names) connected.set(name, workersIn(listed.lists, set.prefix, name).length)
  return { refused: undefined, rows: [], connected }
}

function rowsOf(queue: string, prefix: string, conns: WorkerConnection[], now: number): Map<string, WorkerRow> {
  const rows = new Map<string, WorkerRow>()
  for (const c of conns) {
    const name = workerNameOf(c.rawname ?? '', prefix, queue) ?? '(unnamed BullMQ worker)'
    const row = rows.get(name) ?? { queue, name, hosts: [], connections: 0, inFlight: 0, lapsed: 0, lastSeen: undefined }
    const host = hostOf(c.addr)
    if (!row.hosts.includes(host)) row.hosts.push(host)
    row.connections += 1
    const seen = now - Number(c.idle ?? 0) * 1_000
    row.lastSeen = Math.max(row.lastSeen ?? 0, seen)
    rows.set(name, row)
  }
  return rows
}

/** Every worker of the queues shown: connected ones, and gone ones still holding jobs. */
export async function readPresence(set: QueueSet, names: string[], now: number): Promise<Presence> {
  const [listed, holders] = await Promise.all([
    readClientLists(set),
    Promise.all(names.map((name) => leaseHolders(set.client, queueKeys(set.prefix, name), ACTIVE_SAMPLE))),
  ])
  const refused = 'refused' in listed ? listed.refused : undefined
  const connected = new Map<string, number>()
  const rows: WorkerRow[] = []
  names.forEach((queue, i) => {
    const conns = 'lists' in listed ? workersIn(listed.lists, set.prefix, queue) : []
    if (!refused) connected.set(queue, conns.length)
    const byName = rowsOf(queue, set.prefix, conns, now)
    for (const h of holders[i] ?? []) {
      const name = h.workerName ?? '(unknown worker)'
      const row = byName.get(name) ?? { queue, name, hosts: [], connections: 0, inFlight: 0, lapsed: 0, lastSeen: undefined }
      row.inFlight += 1
      if (!h.live) row.lapsed += 1
      byName.set(name, row)
    }
    rows.push(...[...byName.values()].sort((a, b) => a.name.localeCompare(b.name)))
  })
  return { refused, rows, connected }
}

export interface RedisNodeHealth {
  node: string
  /** `redis 7.2.4`, `valkey 8.0.1`. */
  version: string
  usedMemory: number | undefined
  /** 0: no limit. */
  maxmemory: number | undefined
  policy: string | undefined
}

export interface RedisHealth {
  /** Why INFO could not be read. */
  refused: string | undefined
  nodes: RedisNodeHealth[]
}

const num = (text: string | undefined) => (text === undefined || text === '' ? undefined : Number(text))

export async function readHealth(set: QueueSet): Promise<RedisHealth> {
  try {
    const infos = await serverInfos(set.client)
    return {
      refused: undefined,
      nodes: infos.map(({ node, info }) => ({
        node,
        version: info.valkey_version ? `valkey ${info.valkey_version}` : `redis ${info.redis_version ?? '?'}`,
        usedMemory: num(info.used_memory),
        maxmemory: num(info.maxmemory),
        policy: info.maxmemory_policy,
      })),
    }
  } catch (err) {
    if (!(err instanceof Error) || err.name !== 'ReplyError') throw err
    return { refused: `INFO was refused (${err.message}): grant +info to the dashboard's Redis user`, nodes: [] }
  }
}

/** The nodes whose policy lets Redis delete keys under memory pressure (any but noeviction). */
export const evicting = (h: RedisHealth): RedisNodeHealth[] => h.nodes.filter((n) => n.policy !== undefined && n.policy !== 'noeviction')
