/**
 * The least-privilege Redis users of docs/reaper.md (Deploying the reaper, step 1), exactly as written there, end to
 * end on a standalone Redis and on a Redis Cluster: producers and workers add, take, fail and complete jobs;
 * the reaper sweeps (marks, recovers, fails), claims and publishes failed jobs, finds queues missing from the registry and
 * registers them again; the CLI's read-only commands answer. Redis's ACL LOG stays empty and nothing but
 * JSON reaches the log. A user made from the guide's former line (no TIME) fails every sweep with ERR_NOPERM
 * naming TIME and the rule to add.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import type { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { Queue, Worker } from '../../lib/index.js'
import { registryKey } from '../../lib/redis/keys.js'
import { useCluster } from '../helpers/cluster.js'
import { useCapturedLogs } from '../helpers/log-lines.js'
import { crashedJobs, stalledBefore } from '../helpers/queue-state.js'
import { startRedis, type TestRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const run = promisify(execFile)
const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname
const PASSWORD = 'acl-test-pw'

/** The ACL lines of docs/reaper.md's ```redis-acl block, by user name. */
function docAcl(): Record<'reaper' | 'app', string[]> {
  const doc = readFileSync(new URL('../../docs/reaper.md', import.meta.url), 'utf8')
  const block = /```redis-acl\n([\s\S]*?)```/.exec(doc)?.[1] ?? ''
  const lines = block
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('ACL SETUSER '))
  const byUser = Object.fromEntries(lines.map((l) => [l.split(' ')[2], l.replace('>PASSWORD', `>${PASSWORD}`).split(' ').slice(1)]))
  if (!byUser.reaper || !byUser.app) throw new Error('docs/reaper.md: the redis-acl block needs an ACL SETUSER line for reaper and for app')
  return byUser as Record<'reaper' | 'app', string[]>
}

/** The ACL command on every node (a cluster keeps users per node). */
async function setUsers(nodes: Redis[], users: string[][]) {
  for (const node of nodes) for (const args of users) await node.call('ACL', ...args)
  for (const node of nodes) await node.call('ACL', 'LOG', 'RESET')
}
const aclLog = async (nodes: Redis[]) => (await Promise.all(nodes.map((n) => n.call('ACL', 'LOG')))).flat()

const logs = useCapturedLogs()

/** Producer, workers, the reaper and the CLI, as the two users, on `url(user)`. */
async function endToEnd(admin: Redis | Cluster, nodes: Redis[], url: (user: string) => string, env: Record<string, string> = {}) {
  // direct: the producer connects as the ACL user app, which the test is about
  const queue = new Queue('emails', { connection: url('app') })
  // Producers and workers: add, then fail two jobs (one attempt) and complete one.
  await queue.add('bad', {}, { jobId: 'f1', attempts: 1 })
  await queue.add('bad', {}, { jobId: 'f2', attempts: 1 })
  await queue.add('good', {}, { jobId: 'ok' })
  // direct: the worker connects as the ACL user app, which the test is about
  const worker = new Worker('emails', async (job) => (job.name === 'good' ? 'done' : Promise.reject(new Error('boom'))), {
    connection: url('app'),
  })
  await waitFor(async () => {
    const c = await queue.counts()
    return c.failed === 2 && c.completed === 1
  })
  await worker.close()
  // A crashed worker's jobs (the admin builds them), on their last attempt, in a queue lost from the registry.
  // Stalled once before: with the default allowance (maxStalledCount 1) this stall fails them.
  await stalledBefore(admin, 'sms', await crashedJobs(admin, 'sms', 2, { attempts: 1 }))
  await admin.srem(registryKey('emq'), 'sms')

  // Metrics on (EMF lines on stdout): only a reaper that publishes claims and settles the failed jobs.
  const handler = createHandler({ REDIS_URL: url('reaper'), SWEEP_GRACE_MS: '0', METRICS_MODE: 'emf', ...env })
  const first = await handler({}, { getRemainingTimeInMillis: () => 50_000 })
  const second = await handler({}, { getRemainingTimeInMillis: () => 50_000 })
  await handler.close()

  const cli = await Promise.all([
    run(process.execPath, [BIN, 'stats', '--redis-url', url('app'), '--json']),
    run(process.execPath, [BIN, 'inspect', 'emails', '--redis-url', url('app')]),
    run(process.execPath, [BIN, 'jobs', 'emails', '--state', 'failed', '--redis-url', url('app')]),
  ])
  await queue.close()
  return { first, second, cli, acl: await aclLog(nodes) }
}

function expectEndToEnd(r: Awaited<ReturnType<typeof endToEnd>>) {
  // Discovery found `sms` (jobs in flight, not registered) and registered it again; the second run failed them.
  expect(r.first.queues.sms).toEqual({ marked: 2, recovered: 0, failed: 0 })
  expect(r.second.queues.sms).toEqual({ marked: 0, recovered: 0, failed: 2 })
  expect(Object.values({ ...r.first.queues, ...r.second.queues }).filter((q) => 'error' in q)).toEqual([])
  // The failed jobs counted: the workers' two (first run) and the sweep's two (second run).
  const queueLines = logs.lines.filter((l) => l.message === 'queue')
  expect(queueLines.reduce((n, l) => n + Number(l.failedNew ?? 0), 0)).toBe(4)
  expect(r.cli[0].stdout).toMatch(/"emails"/)
  expect(r.cli[2].stdout).toMatch(/f1/)
  expect(r.acl).toEqual([])
  expect(logs.text.filter((t) => !t.startsWith('{'))).toEqual([])
}

describe('standalone Redis', () => {
  let redis: TestRedis
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })
  beforeEach(async () => {
    await redis.client.flushall()
    const acl = docAcl()
    await setUsers([redis.client], [acl.reaper, acl.app])
  })
  const url = (user: string) => `redis://${user}:${PASSWORD}@127.0.0.1:${redis.port}`

  it('the users of docs/reaper.md run everything end to end; ACL LOG stays empty; only JSON in the log', async () => {
    expectEndToEnd(await endToEnd(redis.client, [redis.client], url))
  }, 30_000)

  it("the guide's former line (no TIME): every sweep fails with ERR_NOPERM naming TIME and the rule to add", async () => {
    await redis.client.call(
      'ACL',
      'SETUSER',
      'old',
      'on',
      `>${PASSWORD}`,
      '~emq:*',
      '&*',
      '+@read',
      '+@write',
      '+@scripting',
      '+@connection',
    )
    await crashedJobs(redis.client, 'emails', 1)
    const handler = createHandler({ REDIS_URL: url('old'), METRICS_MODE: 'off', IS_LOCAL: 'true' })
    const summary = await handler({}, {})
    expect(summary.queues.emails?.error).toMatch(/refused inside the script: TIME/)
    expect(logs.line('queue')).toMatchObject({
      errorCode: 'ERR_NOPERM',
      hint: expect.stringMatching(/may not run TIME: add \+time/),
    })
  })

  it("a key outside the user's patterns is named as such", async () => {
    await redis.client.call('ACL', 'SETUSER', 'narrow', 'on', `>${PASSWORD}`, '~other:*', '+@all')
    const handler = createHandler({ REDIS_URL: url('narrow'), METRICS_MODE: 'off', IS_LOCAL: 'true', QUEUES: 'emails' })
    const summary = await handler({}, {})
    expect(summary.queues.emails?.error).toMatch(/NOPERM/)
    expect(logs.line('queue')).toMatchObject({ errorCode: 'ERR_NOPERM', hint: expect.stringMatching(/key patterns must cover.*~emq:\*/) })
  })
})

describe('Redis Cluster', () => {
  const cluster = useCluster()
  let admin: Cluster
  beforeAll(() => {
    admin = cluster.connect()
  })
  beforeEach(async () => {
    await Promise.all(cluster.nodes.map((n) => n.client.flushall()))
    const acl = docAcl()
    await setUsers(
      cluster.nodes.map((n) => n.client),
      [acl.reaper, acl.app],
    )
  })
  const url = (user: string) => cluster.url.replace('redis+cluster://', `redis+cluster://${user}:${PASSWORD}@`)

  it('the users of docs/reaper.md run everything end to end on every master; ACL LOG stays empty', async () => {
    expectEndToEnd(
      await endToEnd(
        admin,
        cluster.nodes.map((n) => n.client),
        url,
      ),
    )
  }, 60_000)
})
