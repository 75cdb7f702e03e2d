/** The Lambda handler against real Redis: two invocations recover a crashed worker's jobs, and more. */
import { createServer, type Server } from 'node:net'
import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { EchoMQError } from '../../lib/index.js'
import { reaperConfig } from '../../lib/reaper/config.js'
import { createReaper, runReaper } from '../../lib/reaper/reaper.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useQueues } from '../helpers/fixture.js'
import { useCapturedLogs } from '../helpers/log-lines.js'
import { crashedJobs, stalledBefore } from '../helpers/queue-state.js'
import { freePort, startRedis, useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'

const redis = useRedis()
const { open: openQueue } = useQueues(redis)
const captured = useCapturedLogs()

const env = (extra: Record<string, string> = {}) => ({
  REDIS_URL: redis.url,
  METRICS_MODE: 'off',
  SWEEP_GRACE_MS: '0',
  IS_LOCAL: 'true',
  ...extra,
})
const context = { getRemainingTimeInMillis: () => 50_000 }

describe('handler', () => {
  it("marks a crashed worker's jobs on one invocation and recovers them on the next", async () => {
    const ids = await crashedJobs(redis.client, 'emails', 3)
    const handler = createHandler(env())

    const first = await handler({ 'detail-type': 'Scheduled Event', source: 'aws.events' }, context)
    const second = await handler({}, context)

    expect(first).toEqual({ sweeps: 1, queues: { emails: { marked: 3, recovered: 0, failed: 0 } } })
    expect(second).toEqual({ sweeps: 1, queues: { emails: { marked: 0, recovered: 3, failed: 0 } } })
    const q = openQueue('emails')
    for (const id of ids) expect(await q.getJob(id)).toMatchObject({ state: 'wait', attemptsMade: 0, stalledCounter: 1 })
    // One line per invocation for the queue where something happened: the marks, then the recovery by id.
    const lines = captured.text.map((l) => JSON.parse(l) as { message: string; queue?: string })
    expect(lines.filter((l) => l.message === 'queue')).toEqual([
      expect.objectContaining({ queue: 'emails', marked: 3, recovered: 0 }),
      expect.objectContaining({ queue: 'emails', marked: 0, recovered: 3, recoveredIds: expect.arrayContaining(ids) }),
    ])
  })

  it('runs SWEEPS_PER_INVOCATION sweeps spaced SWEEP_INTERVAL_MS apart and sums them', async () => {
    await stalledBefore(redis.client, 'emails', await crashedJobs(redis.client, 'emails', 2, { attempts: 1 }))
    const handler = createHandler(env({ SWEEPS_PER_INVOCATION: '3', SWEEP_INTERVAL_MS: '20' }))

    const summary = await handler(undefined, context)

    expect(summary).toEqual({ sweeps: 3, queues: { emails: { marked: 2, recovered: 0, failed: 2 } } })
  })

  it('stops early, before the timeout, when too little time is left for another sweep', async () => {
    const handler = createHandler(env({ SWEEPS_PER_INVOCATION: '5', SWEEP_INTERVAL_MS: '1000', QUEUES: 'a' }))
    const summary = await handler({}, { getRemainingTimeInMillis: () => 3_000 })
    expect(summary.sweeps).toBe(1)
    expect(captured.text.some((l) => l.includes('stopping early'))).toBe(true)
  })

  it('fits five sweeps spaced 10 s apart in a 55 s invocation (docs/reaper.md\u2019s sub-minute setting), not six', async () => {
    let elapsed = 0
    const config = reaperConfig({}, { SWEEPS_PER_INVOCATION: '6', SWEEP_INTERVAL_MS: '10000', QUEUES: 'a' })
    const { summary } = await runReaper(redis.client, config, {
      log: () => undefined,
      remainingMs: () => 55_000 - elapsed,
      sleep: async (ms) => {
        elapsed += ms
      },
    })
    expect(summary.sweeps).toBe(5)
  })

  it('plans each further sweep from the last pass: 5 s passes (20,000 queues on a slow link) fit three sweeps, not five', async () => {
    // A clock the test moves: each pass "takes" 5 s (the reaper reads the clock at its start and its end),
    // each wait its interval.
    let elapsed = 0
    let reads = 0
    const config = reaperConfig({}, { SWEEPS_PER_INVOCATION: '5', SWEEP_INTERVAL_MS: '10000', QUEUES: 'a' })
    const warnings: object[] = []
    const { summary } = await runReaper(redis.client, config, {
      log: (level, message, fields) => {
        if (level === 'warn') warnings.push({ message, ...fields })
      },
      now: () => {
        if (++reads % 2 === 0) elapsed += 5_000
        return elapsed
      },
      remainingMs: () => 55_000 - elapsed,
      sleep: async (ms) => {
        elapsed += ms
      },
    })
    // Sweeps at 0-5, 15-20, 30-35 s; a fourth (45-50 s, with 1.5 x 5 s planned) would leave no room to publish.
    expect(summary.sweeps).toBe(3)
    expect(55_000 - elapsed).toBeGreaterThan(5_000)
    expect(warnings).toEqual([expect.objectContaining({ message: expect.stringMatching(/stopping early/), lastPassMs: 5_000 })])
  })

  it('a warm reaper costs two commands a run for an idle queue: the registry read and the probe', async () => {
    await openQueue('idle').add('job', {}, { jobId: 'x' })
    await redis.client.del(queueKeys('emq', 'idle').wait)
    const reaper = createReaper(reaperConfig({ redisUrl: redis.url, metricsMode: 'off' }, {}), { log: () => undefined })
    try {
      await reaper.run() // cold: connects, pings, checks the eviction policy
      await redis.client.config('RESETSTAT')
      await reaper.run()
      const stats = String(await redis.client.info('commandstats'))
      const calls = Object.fromEntries([...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map(([, name, n]) => [name, Number(n)]))
      // Top-level commands (those run inside the probe script are counted too, but are not sent).
      expect({ evalsha: calls.evalsha, smembers: calls.smembers, ping: calls.ping, config: calls.config, scan: calls.scan }).toEqual({
        evalsha: 1,
        smembers: 1,
        ping: undefined,
        config: undefined,
        scan: undefined,
      })
    } finally {
      await reaper.close()
    }
  })

  it('keeps the grace: with SWEEP_GRACE_MS, back-to-back invocations mark but do not recover', async () => {
    await crashedJobs(redis.client, 'emails', 1)
    const handler = createHandler(env({ SWEEP_GRACE_MS: '60000' }))
    await handler({}, context)
    const second = await handler({}, context)
    expect(second.queues.emails).toEqual({ marked: 0, recovered: 0, failed: 0 })
  })

  it('discovers queues from the registry: a queue created later is swept without a redeploy', async () => {
    const handler = createHandler(env())
    expect(await handler({}, context)).toEqual({ sweeps: 1, queues: {} })
    await crashedJobs(redis.client, 'late', 1)
    openQueue('other')
    await redis.client.sismember('emq:queues', 'other')

    const summary = await handler({}, context)

    expect(Object.keys(summary.queues).sort()).toEqual(['late', 'other'])
    expect(summary.queues.late?.marked).toBe(1)
  })

  it('reuses one Redis connection across warm invocations', async () => {
    const handler = createHandler({ ...env({ QUEUES: 'a' }), IS_LOCAL: 'false' })
    const connections = async () => Number(/total_connections_received:(\d+)/.exec(await redis.client.info('stats'))?.[1])
    const before = await connections()

    for (let i = 0; i < 3; i++) await handler({}, context)

    expect((await connections()) - before).toBe(1)
    await handler.close()
  })

  it('QUEUES limits the sweep to the listed queues', async () => {
    await crashedJobs(redis.client, 'a', 1)
    await crashedJobs(redis.client, 'b', 1)
    const summary = await createHandler(env({ QUEUES: 'b' }))({}, context)
    expect(Object.keys(summary.queues)).toEqual(['b'])
  })

  it('one broken queue is reported and does not stop the others', async () => {
    await crashedJobs(redis.client, 'good', 2)
    openQueue('broken')
    await redis.client.set(queueKeys('emq', 'broken').active, 'not a sorted set')

    const summary = await createHandler(env())({}, context)

    expect(summary.queues.good).toEqual({ marked: 2, recovered: 0, failed: 0 })
    expect(summary.queues.broken?.error).toMatch(/wrong Redis type/)
    expect(captured.text.some((l) => l.includes('"queue":"broken"') && l.includes('ERR_WRONG_TYPE'))).toBe(true)
  })
})

describe('handler: failures', () => {
  it('a Redis that refuses connections fails the invocation with a clear error', async () => {
    const port = await freePort()
    const handler = createHandler({ REDIS_URL: `redis://user:s3cret-pw@127.0.0.1:${port}`, METRICS_MODE: 'off', REDIS_TIMEOUT_MS: '500' })

    const err = await handler({}, context).catch((e: unknown) => e)

    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe('ERR_CONNECTION')
    expect((err as EchoMQError).message).toMatch(/unreachable/)
    expect((err as EchoMQError).message).not.toContain('s3cret-pw')
    expect(captured.text.join('\n')).not.toContain('s3cret-pw')
  })

  it('a Redis that accepts but never answers fails within REDIS_TIMEOUT_MS instead of hanging', async () => {
    const sockets: import('node:net').Socket[] = []
    const blackhole: Server = createServer((s) => void sockets.push(s))
    await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve))
    const address = blackhole.address()
    const port = typeof address === 'object' && address ? address.port : 0
    const handler = createHandler({ REDIS_URL: `redis://127.0.0.1:${port}`, METRICS_MODE: 'off', REDIS_TIMEOUT_MS: '300' })

    const err = await handler({}, context).catch((e: unknown) => e)

    for (const s of sockets) s.destroy()
    blackhole.close()
    expect((err as EchoMQError).code).toBe('ERR_CONNECTION')
    expect((err as EchoMQError).message).toMatch(/300 ms/)
  })

  it('recovers on the next invocation after Redis comes back (the broken connection is not reused)', async () => {
    const other = await startRedis()
    const handler = createHandler({ REDIS_URL: other.url, METRICS_MODE: 'off', REDIS_TIMEOUT_MS: '300', QUEUES: 'a' })
    expect((await handler({}, context)).sweeps).toBe(1)
    other.process.kill('SIGSTOP')
    await expect(handler({}, context)).rejects.toMatchObject({ code: 'ERR_CONNECTION' })
    other.process.kill('SIGCONT')
    expect((await handler({}, context)).sweeps).toBe(1)
    await other.stop()
  })

  it.each([
    [{ SWEEPS_PER_INVOCATION: '0' }, /SWEEPS_PER_INVOCATION: expected an integer from 1 to 60, got: "0"/],
    [{ SWEEP_INTERVAL_MS: 'ten' }, /SWEEP_INTERVAL_MS: expected an integer/],
    [{ SWEEP_GRACE_MS: '-1' }, /SWEEP_GRACE_MS/],
    [{ METRICS_MODE: 'loud' }, /METRICS_MODE: expected one of api, emf, off/],
    [{ REDIS_CLUSTER: 'yes' }, /REDIS_CLUSTER: expected one of true, false/],
    [{ QUEUES: 'ok,bad queue' }, /QUEUES: expected .* got: "bad queue"/],
    [{ REDIS_URL: 'http://user:hunter2@host' }, /REDIS_URL: expected a redis:\/\//],
    [{ REDIS_URL: 'redis://user:hunter2@h1:1,h2:2' }, /REDIS_URL: names 2 hosts/],
    [{ REDIS_URL: 'redis://user:hunter2@' }, /REDIS_URL: bad host/],
    [{ METRICS_NAMESPACE: 'AWS/Lambda' }, /METRICS_NAMESPACE/],
    [{ PREFIX: 'a{b}' }, /PREFIX/],
  ])('rejects the configuration %j, naming the variable, and writes nothing', async (bad, message) => {
    await crashedJobs(redis.client, 'emails', 1)
    const before = await snapshot(redis.client)

    const err = await createHandler(env(bad))({}, context).catch((e: unknown) => e)

    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe('ERR_CONFIG')
    expect((err as Error).message).toMatch(message)
    expect((err as Error).message).not.toContain('hunter2')
    expect(await snapshot(redis.client)).toEqual(before)
  })

  it.each([
    ['a string', 'sweep'],
    ['a number', 42],
    ['an array', []],
    ['bad queues', { queues: ['a b'] }],
    ['empty queues', { queues: [] }],
    ['a misspelt field', { queue: 'emails' }],
  ])('rejects %s as the event with ERR_EVENT and writes nothing', async (_label, event) => {
    await crashedJobs(redis.client, 'emails', 1)
    const before = await snapshot(redis.client)
    await expect(createHandler(env())(event, context)).rejects.toMatchObject({ code: 'ERR_EVENT' })
    if ('queue' in Object(event)) {
      await expect(createHandler(env())(event, context)).rejects.toThrow(/unknown event field "queue" \(did you mean "queues"\?\)/)
    }
    expect(await snapshot(redis.client)).toEqual(before)
  })

  it('an event naming queues sweeps only those', async () => {
    await crashedJobs(redis.client, 'a', 1)
    await crashedJobs(redis.client, 'b', 1)
    const summary = await createHandler(env())({ queues: ['a'] }, context)
    expect(Object.keys(summary.queues)).toEqual(['a'])
  })

  it('warns once per cold start when maxmemory-policy is not noeviction', async () => {
    await redis.client.config('SET', 'maxmemory-policy', 'allkeys-lru')
    const handler = createHandler(env({ QUEUES: 'a' }))
    await handler({}, context)
    await handler({}, context)
    await redis.client.config('SET', 'maxmemory-policy', 'noeviction')
    expect(captured.text.filter((l) => l.includes('maxmemory-policy is allkeys-lru'))).toHaveLength(1)
  })

  it('a managed Redis that refuses CONFIG is handled: a note, and the sweep goes on', async () => {
    const managed = await startRedis(['--rename-command', 'CONFIG', ''])
    const handler = createHandler({ REDIS_URL: managed.url, METRICS_MODE: 'off', QUEUES: 'a' })
    try {
      expect(await handler({}, context)).toEqual({ sweeps: 1, queues: { a: { marked: 0, recovered: 0, failed: 0 } } })
      expect(captured.text.some((l) => l.includes('could not read maxmemory-policy'))).toBe(true)
    } finally {
      await handler.close()
      await managed.stop()
    }
  })
})
