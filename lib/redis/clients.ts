/**
 * Who is connected, and how the server is: the commands that are not on a queue's keys but on the
 * server itself. CLIENT LIST (which connections are open, with their names), INFO (version, memory,
 * `maxmemory_policy`), each from every primary of a cluster.
 *
 * A worker is seen through the name of its blocking connection, set once per connect (ioredis sends
 * CLIENT SETNAME with the connect handshake, again after a reconnect, and ignores a refusal): BullMQ's
 * name, `<prefix>:<base64(queue)>:w:<worker name>`, so a worker costs an idle queue nothing and its
 * presence is the connection itself. A name CLIENT SETNAME cannot hold (a space, a character outside
 * `!`..`~`) is percent-encoded, as is `%`.
 */
import { Cluster, type Redis } from 'ioredis'
import type { RedisClient } from './connection.js'

/** BullMQ's client name of a queue: `<prefix>:<base64(queue)>`. */
export const queueClientName = (prefix: string, queue: string): string => `${prefix}:${Buffer.from(queue).toString('base64')}`

/** CLIENT SETNAME takes `!`..`~` only; `%` is encoded so that decoding gives the name back. */
const encodeName = (name: string): string =>
  name.replace(/[^!-$&-~]/gu, (c) => [...Buffer.from(c)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''))

export function decodeName(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** The name of a worker's blocking connection (BullMQ's): `<prefix>:<base64(queue)>:w:<worker name>`. */
export const workerConnectionName = (prefix: string, queue: string, worker: string): string =>
  `${queueClientName(prefix, queue)}:w:${encodeName(worker)}`

/**
 * A second connection with the same settings, for blocking commands, named `name` (CLIENT SETNAME with
 * each connect's handshake; a server that refuses it leaves the connection unnamed, nothing else).
 */
export function namedDuplicate(client: RedisClient, name: string): RedisClient {
  if (client instanceof Cluster) {
    const redisOptions = { ...client.options.redisOptions, connectionName: name }
    return client.duplicate(undefined, { redisOptions } as Parameters<Cluster['duplicate']>[1])
  }
  return client.duplicate({ connectionName: name })
}

/**
 * The primaries of a cluster (every node answering for slots), or the one server. A cluster client that
 * has not learnt its nodes yet is asked a PING first (it waits for them, bounded by the command timeout):
 * an empty list would read as "no worker anywhere".
 */
async function servers(client: RedisClient): Promise<Redis[]> {
  if (!(client instanceof Cluster)) return [client]
  if (client.nodes('master').length === 0) await client.ping()
  return client.nodes('master')
}

/** CLIENT LIST of every primary (one text per node). Rejects with the server's refusal, if any. */
export async function clientLists(client: RedisClient): Promise<string[]> {
  return Promise.all((await servers(client)).map((node) => node.client('LIST') as Promise<string>))
}

/** CLIENT LIST's lines as field maps (`id`, `addr`, `name`, `age`, `idle`, ...). */
export function parseClientList(text: string): Record<string, string>[] {
  const out: Record<string, string>[] = []
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') continue
    const entry: Record<string, string> = {}
    for (const pair of line.split(' ')) {
      const eq = pair.indexOf('=')
      if (eq > 0) entry[pair.slice(0, eq)] = pair.slice(eq + 1)
    }
    out.push(entry)
  }
  return out
}

/** INFO's `field:value` lines as a map. */
function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':')
    if (colon > 0 && !line.startsWith('#')) out[line.slice(0, colon)] = line.slice(colon + 1).trim()
  }
  return out
}

/** INFO server and memory of every primary, with each node's address. */
export async function serverInfos(client: RedisClient): Promise<{ node: string; info: Record<string, string> }[]> {
  return Promise.all(
    (await servers(client)).map(async (node) => {
      const [server, memory] = await Promise.all([node.info('server'), node.info('memory')])
      const { host, port } = node.options
      return { node: `${host ?? ''}:${port ?? ''}`, info: { ...parseInfo(server), ...parseInfo(memory) } }
    }),
  )
}
