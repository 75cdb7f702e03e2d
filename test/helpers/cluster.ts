/**
 * Starts a private three-master Redis Cluster (no replicas) on free ports in temp dirs, for one test file.
 * Each node gets an explicit cluster bus port (`--cluster-port`, Redis 7+), so a data port near 65535
 * never yields an impossible bus port. Stop everything with stop().
 */
import { type ChildProcess, execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { Cluster, Redis } from 'ioredis'
import { spawnRedisServer } from '../../cli/support/local-redis.js'
import { freePort } from './redis-server.js'
import { waitFor } from './wait.js'

const run = promisify(execFile)

export interface ClusterNode {
  port: number
  busPort: number
  dir: string
  process: ChildProcess
  /** A plain (non-cluster) client to this node, for CLUSTER INFO / KEYSLOT and the like. */
  client: Redis
}

export interface TestCluster {
  nodes: ClusterNode[]
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2`: two seeds, as the README allows. */
  url: string
  /** `redis+cluster://127.0.0.1:p1`: a single seed. */
  singleSeedUrl: string
  /** A new ioredis Cluster client, closed in stop(). */
  connect(): Cluster
  /** Port of the master that owns `slot` (from CLUSTER SLOTS). */
  ownerOf(slot: number): Promise<number>
  slotOf(key: string): Promise<number>
  stop(): Promise<void>
}

export async function startCluster(size = 3): Promise<TestCluster> {
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
      const client = new Redis(p, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
      client.on('error', () => undefined)
      clients.push(client)
      nodes.push({ port: p, busPort: bus, dir, process: child, client })
    }
    for (const n of nodes)
      await waitFor(async () => (await n.client.ping()) === 'PONG', { timeoutMs: 10_000, what: `cluster node ${n.port}` })
    await run(
      'redis-cli',
      ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'],
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
  return {
    nodes,
    url: `redis+cluster://${nodes
      .slice(0, 2)
      .map((n) => `127.0.0.1:${n.port}`)
      .join(',')}`,
    singleSeedUrl: `redis+cluster://127.0.0.1:${first.port}`,
    connect() {
      const c = new Cluster(
        nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
        { redisOptions: { maxRetriesPerRequest: 2 } },
      )
      c.on('error', () => undefined)
      clients.push(c)
      return c
    },
    async ownerOf(slot) {
      const range = (await first.client.cluster('SLOTS')).find(([a, b]) => slot >= a && slot <= b)
      const port = range?.[2]?.[1]
      if (port === undefined) throw new Error(`slot ${slot} is not assigned`)
      return port
    },
    async slotOf(key) {
      return (await first.client.cluster('KEYSLOT', key)) as number
    },
    stop,
  }
}
