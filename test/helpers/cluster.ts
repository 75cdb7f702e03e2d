/**
 * Starts a private three-master Redis Cluster (no replicas) on free ports in temp dirs, for one test file.
 * Each node gets an explicit cluster bus port (`--cluster-port`, Redis 7+), so a data port near 65535
 * never yields an impossible bus port. Stop everything with stop().
 *
 * With `tls`, the cluster is what ElastiCache (serverless, or cluster mode with in-transit encryption)
 * serves: TLS only, on the client port and the bus, with the certificate given (one that names a host, not
 * an address), and every node announcing `hostname` (`cluster-preferred-endpoint-type hostname`), so
 * CLUSTER SLOTS answers with names and a client reaches each node by the name its certificate holds.
 */
import { type ChildProcess, execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { Cluster, Redis, type RedisOptions } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'
import { spawnRedisServer } from '../../cli/support/local-redis.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { freePort } from './redis-server.js'
import type { Certs } from './tls.js'
import { waitFor } from './wait.js'

const run = promisify(execFile)

interface ClusterNode {
  port: number
  busPort: number
  dir: string
  process: ChildProcess
  /** A plain (non-cluster) client to this node, for CLUSTER INFO / KEYSLOT and the like. */
  client: Redis
}

export interface ClusterTls {
  certs: Certs
  /** The name every node announces, and the seeds' host in the URLs (default: localhost). */
  hostname?: string
  /** What the nodes announce in CLUSTER SLOTS: their host name (default), or their address, as a cluster set up without one does. */
  announce?: 'hostname' | 'ip'
}

export interface TestCluster {
  nodes: ClusterNode[]
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2`: two seeds, as the README allows (with tls: `rediss+cluster://<hostname>:p1,...`). */
  url: string
  /** `redis+cluster://127.0.0.1:p1`: a single seed. */
  singleSeedUrl: string
  /** A new ioredis Cluster client, closed in stop(). */
  connect(): Cluster
  /** Port of the master that owns `slot` (from CLUSTER SLOTS). */
  ownerOf(slot: number): Promise<number>
  slotOf(key: string): Promise<number>
  /** One queue name per master (`<stem>0`, `<stem>1`...: the first whose hash tag lands on each), under prefix emq. */
  queuesOnEachMaster(stem: string): Promise<string[]>
  stop(): Promise<void>
}

/** redis-server flags and client options for a TLS cluster that announces host names. */
function tlsSettings(tls: ClusterTls | undefined) {
  if (!tls)
    return {
      serverArgs: (_port: number) => [] as string[],
      cliArgs: [] as string[],
      clientOptions: {} as Pick<RedisOptions, 'tls'>,
      host: '127.0.0.1',
      scheme: 'redis+cluster',
    }
  const hostname = tls.hostname ?? 'localhost'
  const { cert, key, ca } = tls.certs
  const serverArgs = (port: number) => [
    ...['--port', '0', '--tls-port', String(port), '--tls-cluster', 'yes', '--tls-auth-clients', 'no'],
    ...['--tls-cert-file', cert, '--tls-key-file', key, '--tls-ca-cert-file', ca],
    ...(tls.announce === 'ip' ? [] : ['--cluster-announce-hostname', hostname, '--cluster-preferred-endpoint-type', 'hostname']),
  ]
  // The admin clients reach 127.0.0.1 but check the certificate against the name it holds.
  const clientOptions: Pick<RedisOptions, 'tls'> = { tls: { ca: readFileSync(ca), servername: hostname } }
  return { serverArgs, cliArgs: ['--tls', '--cacert', ca, '--sni', hostname], clientOptions, host: hostname, scheme: 'rediss+cluster' }
}

export async function startCluster(size = 3, tls?: ClusterTls): Promise<TestCluster> {
  const settings = tlsSettings(tls)
  const nodes: ClusterNode[] = []
  const clients: (Redis | Cluster)[] = []
  const stop = async () => {
    for (const c of clients) c.disconnect()
    await Promise.all(
      nodes.map(async (n) => {
        if (n.process.exitCode === null && n.process.signalCode === null) {
          const exited = new Promise((resolve) => n.process.once('exit', resolve))
          n.process.kill('SIGKILL')
          await exited
        }
        rmSync(n.dir, { recursive: true, force: true })
      }),
    )
  }
  try {
    const used = new Set<number>()
    const port = async () => {
      for (;;) {
        const p = await freePort()
        if (!used.has(p)) {
          used.add(p)
          return p
        }
      }
    }
    for (let i = 0; i < size; i++) {
      const [p, bus] = [await port(), await port()]
      const dir = mkdtempSync(path.join(tmpdir(), 'emq-cluster-'))
      const child = spawnRedisServer(p, dir, [
        ...settings.serverArgs(p),
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        path.join(dir, 'nodes.conf'),
        '--cluster-port',
        String(bus),
        '--cluster-node-timeout',
        '5000',
        '--maxmemory-policy',
        'noeviction',
      ])
      const client = new Redis(p, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 50, ...settings.clientOptions })
      client.on('error', () => undefined)
      clients.push(client)
      nodes.push({ port: p, busPort: bus, dir, process: child, client })
    }
    for (const n of nodes)
      await waitFor(async () => (await n.client.ping()) === 'PONG', { timeoutMs: 10_000, what: `cluster node ${n.port}` })
    await run(
      'redis-cli',
      [...settings.cliArgs, '--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: 30_000 },
    )
    // Every node must agree: state ok, all slots assigned, every master known, the same slot map.
    await waitFor(
      async () => {
        const infos = await Promise.all(nodes.map((n) => n.client.cluster('INFO')))
        if (
          !infos.every(
            (i) =>
              /cluster_state:ok/.test(i) && /cluster_slots_assigned:16384/.test(i) && new RegExp(`cluster_known_nodes:${size}\\b`).test(i),
          )
        )
          return false
        const maps = await Promise.all(
          nodes.map(async (n) =>
            JSON.stringify(
              (await n.client.cluster('SLOTS')).map(([a, b, master]) => [a, b, master?.[1]]).sort((x, y) => Number(x[0]) - Number(y[0])),
            ),
          ),
        )
        return maps.every((m) => m === maps[0])
      },
      { timeoutMs: 20_000, intervalMs: 50, what: 'cluster_state:ok on every node' },
    )
  } catch (err) {
    await stop()
    throw err
  }
  const first = nodes[0] as ClusterNode
  const ownerOf = async (slot: number) => {
    const range = (await first.client.cluster('SLOTS')).find(([a, b]) => slot >= a && slot <= b)
    const port = range?.[2]?.[1]
    if (port === undefined) throw new Error(`slot ${slot} is not assigned`)
    return port
  }
  const slotOf = async (key: string) => (await first.client.cluster('KEYSLOT', key)) as number
  return {
    nodes,
    url: `${settings.scheme}://${nodes
      .slice(0, 2)
      .map((n) => `${settings.host}:${n.port}`)
      .join(',')}`,
    singleSeedUrl: `${settings.scheme}://${settings.host}:${first.port}`,
    connect() {
      const c = new Cluster(
        nodes.map((n) => ({ host: settings.host, port: n.port })),
        // The seeds as named: resolved first, they would be addresses, which a host's certificate does not hold.
        { dnsLookup: (address, done) => done(null, address), redisOptions: { maxRetriesPerRequest: 2, ...settings.clientOptions } },
      )
      c.on('error', () => undefined)
      clients.push(c)
      return c
    },
    ownerOf,
    slotOf,
    async queuesOnEachMaster(stem) {
      const byOwner = new Map<number, string>()
      for (let i = 0; byOwner.size < nodes.length && i < 200; i++) {
        const name = `${stem}${i}`
        const owner = await ownerOf(await slotOf(queueKeys('emq', name).wait))
        if (!byOwner.has(owner)) byOwner.set(owner, name)
      }
      return [...byOwner.values()]
    },
    stop,
  }
}

/**
 * A private three-master cluster for the tests of a file or a describe block: started before them, stopped
 * after. The returned object is filled in by the beforeAll hook.
 */
export function useCluster(): TestCluster {
  const holder = {} as TestCluster
  beforeAll(async () => {
    Object.assign(holder, await startCluster(3))
  }, 90_000)
  afterAll(async () => {
    await holder.stop?.()
  })
  return holder
}
