/**
 * The dashboard takes the connections the command takes: `echomq ui` over TLS as an ACL user (its CA
 * trusted through NODE_EXTRA_CA_CERTS, as docs/connections.md says), and a Redis Cluster (`redis+cluster://`), where
 * the queues live on different nodes: pages, the live values and an action.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../../lib/index.js'
import { useCluster } from '../helpers/cluster.js'
import { startDashboard } from '../helpers/dashboard.js'
import { startTlsRedis, type TlsRedis } from '../helpers/tls.js'
import { waitFor } from '../helpers/wait.js'

const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname

describe('over TLS, as an ACL user', () => {
  let tls: TlsRedis
  let child: ChildProcess | undefined
  beforeAll(async () => {
    tls = await startTlsRedis()
  }, 60_000)
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child?.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }
    await tls?.stop()
  })

  it('echomq ui --redis-url rediss://user:password@... serves the queues; the password is on no page', async () => {
    const client = new Redis({
      host: '127.0.0.1',
      port: tls.tlsPort,
      username: tls.user,
      password: tls.password,
      tls: { ca: readFileSync(tls.certs.ca) },
      maxRetriesPerRequest: 1,
    })
    // direct: a queue on a TLS server with an ACL user, the connection under test
    const q = new Queue('secure', { connection: client })
    await q.add('send', { n: 1 }, { jobId: 's1', delay: 60_000 })
    await q.close()
    client.disconnect()

    const { REDIS_URL: _unused, ...env } = process.env
    child = spawn(process.execPath, [BIN, 'ui', '--port', '0', '--redis-url', tls.url], {
      env: { ...env, NODE_EXTRA_CA_CERTS: tls.certs.ca },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout?.on('data', (b: Buffer) => (output += b.toString()))
    child.stderr?.on('data', (b: Buffer) => (output += b.toString()))
    const url = await waitFor(() => /on (http:\/\/\S+\/)/.exec(output)?.[1], { what: `the URL (output: ${output})`, timeoutMs: 20_000 })

    const overview = await (await fetch(url)).text()
    expect(overview).toMatch(/data-live="secure\|delayed">1</)
    expect(overview).toContain(`rediss://${tls.user}:***@127.0.0.1:${tls.tlsPort}`)
    const job = await (await fetch(`${url}queues/secure/jobs/s1`)).text()
    expect(job).toContain('<code>s1</code>')
    for (const text of [overview, job, output]) expect(text).not.toContain(tls.password)
  })
})

describe('on a Redis Cluster', () => {
  const cluster = useCluster()

  it('queues on different nodes: the overview, a queue, a job, the live values and pause, through redis+cluster://', async () => {
    const client = cluster.connect()
    const names = ['orders', 'emails', 'sms', 'reports']
    const owners = new Set(await Promise.all(names.map(async (n) => cluster.ownerOf(await cluster.slotOf(`emq:{${n}}:wait`)))))
    expect(owners.size).toBeGreaterThan(1)
    for (const [i, name] of names.entries()) {
      // direct: queues on a cluster, the connection under test
      const q = new Queue(name, { connection: client })
      await q.addBulk(Array.from({ length: i + 1 }, (_, j) => ({ name: 'x', data: { j }, opts: { jobId: `${name}-${j}` } })))
    }
    const d = await startDashboard({ connection: cluster.url })
    try {
      const overview = (await d.get('/')).text
      for (const [i, name] of names.entries()) expect(overview).toMatch(new RegExp(`data-live="${name}\\|wait">${i + 1}<`))
      expect(JSON.parse((await d.get('/', { accept: 'application/json' })).text).text['reports|wait']).toBe('4')
      expect((await d.get('/queues/sms?state=wait')).text).toContain('<code>sms-1</code>')
      expect((await d.get('/queues/orders/jobs/orders-0')).status).toBe(200)
      const token = await d.token()
      expect((await d.post('/queues/reports', { token, action: 'pause', back: 'overview' })).status).toBe(303)
      // direct: a queue on a cluster, the connection under test
      expect(await new Queue('reports', { connection: client }).isPaused()).toBe(true)
    } finally {
      await d.served.close()
    }
  })
})
