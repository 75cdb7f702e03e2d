/**
 * EchoMQ on a Redis Cluster served the way managed Redis serves one (ElastiCache serverless, or cluster
 * mode with in-transit encryption): TLS only, a certificate that names a host and no address (DNS:localhost,
 * no IP SAN), nodes that announce that name (`cluster-preferred-endpoint-type hostname`), an ACL user.
 * A Worker, Queue.add, sweep() and the Lambda handler run in child processes that know only the
 * rediss+cluster:// URL (the CA trusted through NODE_EXTRA_CA_CERTS); the CLI's stats and sweep take it as
 * --redis-url. A client that reaches the cluster by address, one that does not trust the CA, and a
 * cluster whose nodes announce addresses fail with the TLS error and what to fix, never with only
 * "Failed to refresh slots cache", and within a bound.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import type { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { EchoMQError, Queue, sweep } from '../../lib/index.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { startCluster, type TestCluster } from '../helpers/cluster.js'
import { type Certs, type Child, makeCerts, spawnTlsClient, spawnTlsWorker } from '../helpers/tls.js'
import { waitFor } from '../helpers/wait.js'

const run = promisify(execFile)
const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname
const PASSWORD = `emqpw-${randomBytes(8).toString('hex')}`
const ALTNAME = /ERR_TLS_CERT_ALTNAME_INVALID.*connect by a name the certificate holds/

let dir: string
let certs: Certs
let cluster: TestCluster
let admin: Cluster
const children: Child[] = []

/** rediss+cluster://emq:<password>@<host>:p1,<host>:p2 */
const urlOf = (c: TestCluster, host = 'localhost') =>
  `rediss+cluster://emq:${PASSWORD}@${c.nodes
    .slice(0, 2)
    .map((n) => `${host}:${n.port}`)
    .join(',')}`

const env = (redisUrl: string, trusted = true) => ({
  REDIS_URL: redisUrl,
  ...(trusted ? { NODE_EXTRA_CA_CERTS: certs.ca } : {}),
  METRICS_MODE: 'off',
  IS_LOCAL: 'true',
  SWEEP_GRACE_MS: '0',
  REDIS_TIMEOUT_MS: '3000',
})

async function child(redisUrl: string): Promise<Child> {
  const c = await spawnTlsClient(env(redisUrl))
  children.push(c)
  return c
}

/** The same ACL user on every node: a cluster keeps users per node, as ElastiCache's RBAC does per cluster. */
async function addUser(c: TestCluster) {
  for (const n of c.nodes) await n.client.call('ACL', 'SETUSER', 'emq', 'reset', 'on', `>${PASSWORD}`, '~*', '&*', '+@all')
}

const cli = (args: string[], redisUrl: string) =>
  run(process.execPath, [BIN, ...args, '--redis-url', redisUrl], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: certs.ca, REDIS_URL: '' },
    timeout: 30_000,
  }).catch((e: { code: number; stdout: string; stderr: string }) => e)

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'emq-tls-cluster-'))
  certs = await makeCerts(dir, ['DNS:localhost'])
  cluster = await startCluster(3, { certs })
  await addUser(cluster)
  admin = cluster.connect()
}, 60_000)
afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()))
  await cluster?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('a TLS cluster whose certificate names a host and whose nodes announce it', () => {
  it('the layout is what managed Redis serves: CLUSTER SLOTS names hosts, the certificate holds no address', async () => {
    const slots = await cluster.nodes[0]?.client.cluster('SLOTS')
    expect(slots?.map(([, , master]) => master?.[0])).toEqual(['localhost', 'localhost', 'localhost'])
    const { stdout } = await run('openssl', ['x509', '-in', certs.cert, '-noout', '-ext', 'subjectAltName'])
    expect(stdout).toMatch(/DNS:localhost/)
    expect(stdout).not.toMatch(/IP Address/)
  })

  it('a Worker and Queue.add in child processes on the URL complete a job; sweep() marks a killed worker’s job, the handler recovers it', async () => {
    const url = urlOf(cluster)
    const client = await child(url)
    const worker = await spawnTlsWorker({ ...env(url), QUEUE: 'tq', LOCK_MS: '600', HEARTBEAT_MS: '150' })
    children.push(worker)
    expect(await client.request({ op: 'add', queue: 'tq', jobId: 'a' })).toMatchObject({ ok: true, result: { id: 'a' } })
    await worker.waitForMessage('active', 'a')
    worker.send({ type: 'finish', id: 'a' })
    await worker.waitForMessage('completed', 'a')
    expect(await admin.hget(queueKeys('emq', 'tq').job('a'), 'state')).toBe('completed')

    expect((await client.request({ op: 'add', queue: 'tq', jobId: 'k' })).ok).toBe(true)
    await worker.waitForMessage('active', 'k')
    await worker.stop()
    const keys = queueKeys('emq', 'tq')
    await waitFor(async () => (await admin.exists(keys.lock('k'))) === 0, { what: 'the lease to lapse' })
    expect(await client.request({ op: 'sweep', queue: 'tq' })).toMatchObject({ ok: true, result: { marked: ['k'] } })
    expect(await client.request({ op: 'handler' })).toMatchObject({ ok: true, result: { queues: { tq: { recovered: 1 } } } })
    expect(await admin.lindex(keys.wait, 0)).toBe('k')
    expect(worker.messages.filter((m) => m.type === 'error')).toEqual([])
  }, 60_000)

  it('echomq stats and echomq sweep with a rediss+cluster:// URL answer', async () => {
    const url = urlOf(cluster)
    const stats = await cli(['stats', '--json'], url)
    const swept = await cli(['sweep', '--queue', 'tq', '--json'], url)
    expect(stats).toMatchObject({ stdout: expect.stringContaining('"tq"') })
    expect(JSON.parse(stats.stdout).tq).toMatchObject({ completed: 1 })
    expect(swept).toMatchObject({ stdout: expect.stringContaining('"tq"') })
    expect(`${stats.stdout}${swept.stdout}`).not.toContain(PASSWORD)
  }, 60_000)
})

describe('what a certificate problem says', () => {
  it('reached by address: the handler, sweep() and the CLI name ERR_TLS_CERT_ALTNAME_INVALID and what to fix', async () => {
    const url = urlOf(cluster, '127.0.0.1')
    const client = await child(url)
    const started = performance.now()
    const handler = await client.request({ op: 'handler' })
    const swept = await client.request({ op: 'sweep', queue: 'tq' })
    const stats = await cli(['stats'], url)

    for (const reply of [handler, swept]) {
      expect(reply.error).toMatchObject({ code: 'ERR_CONNECTION', message: expect.stringMatching(ALTNAME) })
      expect(reply.error?.message).not.toContain(PASSWORD)
    }
    expect(performance.now() - started).toBeLessThan(15_000)
    expect(stats).toMatchObject({ code: 1, stderr: expect.stringMatching(ALTNAME) })
    expect(client.output()).not.toContain(PASSWORD)
  }, 60_000)

  it('a CA this process does not trust: the handler (with a hint), sweep() and Queue.add name the certificate and NODE_EXTRA_CA_CERTS', async () => {
    const url = urlOf(cluster)
    const handler = createHandler({ ...env(url, false), REDIS_TIMEOUT_MS: '1000' })
    const failures = [
      await handler({}, {}).catch((e: unknown) => e),
      await sweep(url, 'tq').catch((e: unknown) => e),
      await (async () => {
        // direct: a queue on the TLS cluster's URL (not the test Redis), whose add() must name the untrusted CA
        const queue = new Queue('tq', { connection: url })
        try {
          return await queue.add('job', {}).catch((e: unknown) => e)
        } finally {
          await queue.close()
        }
      })(),
    ]
    for (const err of failures) {
      expect(err).toBeInstanceOf(EchoMQError)
      expect(err).toMatchObject({
        code: 'ERR_CONNECTION',
        message: expect.stringMatching(/SELF_SIGNED_CERT_IN_CHAIN.*NODE_EXTRA_CA_CERTS/),
      })
      expect((err as Error).message).not.toContain(PASSWORD)
    }
    expect(failures[0]).toMatchObject({ hint: expect.stringMatching(/not signed by a CA this process trusts/) })
    expect(await admin.exists(queueKeys('emq', 'tq').job('1'))).toBe(0)
  }, 60_000)

  it('a cluster whose nodes announce addresses: reached by name, the nodes it names fail the check, and the error says so', async () => {
    const announcing = await startCluster(3, { certs, announce: 'ip' })
    try {
      await addUser(announcing)
      const client = await child(urlOf(announcing))
      const handler = await client.request({ op: 'handler' })
      expect(handler.error).toMatchObject({ code: 'ERR_CONNECTION', message: expect.stringMatching(ALTNAME) })
      expect(handler.error?.message).toMatch(/announce host names/)
    } finally {
      await announcing.stop()
    }
  }, 60_000)
})
