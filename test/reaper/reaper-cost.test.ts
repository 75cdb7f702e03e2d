/**
 * What a reaper pass costs per queue, counted on the client (test/helpers/counting.ts: every command sent,
 * a script call counting once), and what it logs: a queue with a job waiting or a job in flight under a
 * live lease costs at most 2 commands on a cold pass and 1 once the reaper knows it (its probe reads the
 * unmoved head's wait and the known leases), an empty queue 1; a queue where nothing happened writes no
 * log line, while a queue whose jobs are marked or recovered gets one, naming the jobs. Not timed: the
 * time of a pass over 10,000 queues is `npm run bench -- --only reaper`.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { reaperConfig } from '../../lib/reaper/config.js'
import { runReaper, type Seen } from '../../lib/reaper/reaper.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { registerQueue } from '../../lib/registry.js'
import { type Counting, countingClient } from '../helpers/counting.js'
import { type CapturedLogs, captureLogs, type LogLine } from '../helpers/log-lines.js'
import { docQueries, logsInsights } from '../helpers/logs-insights.js'
import { addJobs, crashedJobs, holdJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'

const redis = useRedis()
/** Queues of each kind. */
const N = 20

let counting: Counting
let captured: CapturedLogs
beforeEach(async () => {
  counting = await countingClient(redis.port)
  captured = captureLogs()
})
afterEach(() => {
  counting.close()
  vi.restoreAllMocks()
})

const names = (kind: string) => Array.from({ length: N }, (_, i) => `${kind}-${i}`)

/** N queues with one waiting job, N with one job in flight under a live lease, N registered and empty. */
async function fleet(): Promise<void> {
  for (const q of names('waiting')) await addJobs(redis.client, q, [`${q}-job`])
  for (const q of names('running')) {
    await addJobs(redis.client, q, [`${q}-job`])
    await holdJobs(redis.client, q, 1, { leaseMs: 60_000 })
  }
  for (const q of names('empty')) await registerQueue(redis.client, 'emq', q)
}

describe('commands per queue', () => {
  it('a cold pass sends at most 2 per queue, a warm one 1 (waiting, in flight, empty), plus the registry read', async () => {
    await fleet()
    // Metrics on (emf): the probe reads the failed-job count too, as the deployed reaper's does.
    const config = reaperConfig({}, { REDIS_URL: redis.url, METRICS_MODE: 'emf' })
    // Redis has the scripts already (a warm Redis, a cold reaper): a pass over another queue loaded them.
    await runReaper(counting.client, config, { log: () => undefined, queues: ['running-0'] })
    const seen = new Map<string, Seen>()
    const pass = async () => {
      counting.reset()
      const { summary } = await runReaper(counting.client, config, { log: () => undefined, seen })
      expect(Object.keys(summary.queues)).toHaveLength(3 * N)
      const sent = counting.sent.filter((c) => c !== 'smembers')
      return {
        perQueue: sent.length / (3 * N),
        scripts: sent.filter((c) => c === 'evalsha').length,
        other: sent.filter((c) => c !== 'evalsha'),
      }
    }
    const cold = await pass()
    // The probe of each queue, then one read of the head's wait per waiting queue and one audit per queue in flight.
    expect(cold.perQueue).toBeLessThanOrEqual(2)
    expect(cold.scripts).toBe(3 * N + N)
    expect(cold.other).toEqual(Array(N).fill('hmget'))
    for (let i = 0; i < 2; i++) {
      const warm = await pass()
      expect(warm.perQueue).toBe(1)
      expect(warm.other).toEqual([])
    }
  })

  it('a lease deleted by hand is still found by a warm pass, whose probe saw it alive before', async () => {
    await fleet()
    const config = reaperConfig({}, { REDIS_URL: redis.url, METRICS_MODE: 'off', SWEEP_GRACE_MS: '0' })
    const seen = new Map<string, Seen>()
    const run = () => runReaper(counting.client, config, { log: () => undefined, seen, queues: ['running-3'] })
    expect((await run()).summary.queues['running-3']).toEqual({ marked: 0, recovered: 0, failed: 0 })
    await redis.client.del(queueKeys('emq', 'running-3').lock('running-3-job'))
    expect((await run()).summary.queues['running-3']).toEqual({ marked: 1, recovered: 0, failed: 0 })
    expect((await run()).summary.queues['running-3']).toEqual({ marked: 0, recovered: 1, failed: 0 })
  })

  it('a warm pass reads a new head of the line once: its age is that job’s wait, not the last one’s', async () => {
    const config = reaperConfig({}, { REDIS_URL: redis.url, METRICS_MODE: 'off' })
    const seen = new Map<string, Seen>()
    await addJobs(redis.client, 'line', ['first', 'second'])
    await redis.client.hset(queueKeys('emq', 'line').job('first'), 'createdOn', Date.now() - 60_000)
    const age = async () => (await runReaper(counting.client, config, { log: () => undefined, seen })).runs.line?.oldestWaitAgeMs ?? 0
    expect(await age()).toBeGreaterThanOrEqual(60_000)
    expect(await age()).toBeGreaterThanOrEqual(60_000) // the same head, read by the probe
    await holdJobs(redis.client, 'line', 1, { leaseMs: 60_000 }) // `first` leaves the line
    counting.reset()
    expect(await age()).toBeLessThan(60_000)
    expect(counting.sent).toContain('hmget')
  })
})

describe('the log through the Lambda handler', () => {
  // A function: the server's URL is known once useRedis's beforeAll has run.
  const env = () => ({ REDIS_URL: redis.url, METRICS_MODE: 'emf', SWEEP_GRACE_MS: '0', IS_LOCAL: 'true' })
  const context = { awsRequestId: 'req-1', functionName: 'sweep', getRemainingTimeInMillis: () => 50_000 }

  it('idle queues write no line of their own; the summary has the totals and the queue with the oldest wait', async () => {
    await fleet()
    await redis.client.hset(queueKeys('emq', 'waiting-7').job('waiting-7-job'), 'createdOn', Date.now() - 60_000)
    const handler = createHandler({ ...env(), POWERTOOLS_SERVICE_NAME: 'cost-test' })
    try {
      for (let i = 0; i < 2; i++) await handler({}, context)
    } finally {
      await handler.close()
    }
    const reaperLines = captured.lines.filter((l) => l.service === 'cost-test' && l.level !== undefined) // not the EMF documents
    expect(reaperLines.map((l) => l.message)).toEqual(['summary', 'summary'])
    expect(reaperLines[1]).toMatchObject({
      queuesSwept: 3 * N,
      queueLines: 0,
      counts: { wait: N, active: N },
      oldestWaitQueue: 'waiting-7',
      oldestWaitAgeMs: expect.any(Number),
      slowestQueue: expect.any(String),
    })
    expect(reaperLines[1]?.oldestWaitAgeMs).toBeGreaterThanOrEqual(60_000)
    // docs/reaper.md's backlog query finds it.
    const backlog = logsInsights(docQueries().backlog ?? '', captured.lines as LogLine[])
    expect(backlog.map((r) => r.oldestWaitQueue)).toEqual(['waiting-7', 'waiting-7'])
  })

  it('a queue whose jobs are marked, then recovered, gets a line each time, among idle queues that get none', async () => {
    await fleet()
    const ids = await crashedJobs(redis.client, 'emails', 3)
    const handler = createHandler(env())
    try {
      await handler({}, context)
      await handler({}, context)
    } finally {
      await handler.close()
    }
    const queueLines = captured.lines.filter((l) => l.message === 'queue')
    expect(queueLines).toEqual([
      expect.objectContaining({ queue: 'emails', marked: 3, recovered: 0, function_request_id: 'req-1' }),
      expect.objectContaining({ queue: 'emails', recovered: 3, recoveredIds: expect.arrayContaining(ids), counts: expect.any(Object) }),
    ])
    // docs/reaper.md's query finds the recovery and its jobs.
    const recoveries = logsInsights(docQueries().recoveries ?? '', captured.lines as LogLine[])
    expect(recoveries).toEqual([expect.objectContaining({ queue: 'emails', recovered: 3, function_request_id: 'req-1' })])
    expect(recoveries[0]?.recoveredIds).toEqual(expect.arrayContaining(ids))
    const summaries = captured.lines.filter((l) => l.message === 'summary')
    expect(summaries.map((l) => [l.queueLines, l.marked, l.recovered])).toEqual([
      [1, 3, 0],
      [1, 0, 3],
    ])
  })
})
