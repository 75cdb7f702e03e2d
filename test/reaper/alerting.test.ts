/**
 * A reaper that sweeps nothing is no longer green: against real Redis, a user that may not run scripts
 * publishes SweepErrors, and a wrong prefix, an empty registry or listed queues missing from the registry
 * publish QueuesSwept = 0 with a log line saying which it was; workers that are all gone leave a backlog
 * that only OldestWaitAge shows, past the backlog alarm's default threshold. Metrics are caught at a local
 * CloudWatch endpoint by the real client; workers fail jobs for real.
 */
import { describe, expect, it } from 'vitest'
import { METRIC_NAMES } from '../../lib/reaper/metrics.js'
import { useQueues } from '../helpers/fixture.js'
import { crashedJobs, stalledBefore } from '../helpers/queue-state.js'
import { useReaperInvocations } from '../helpers/reaper-invocations.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const { open, worker } = useQueues(redis)
const reaper = useReaperInvocations(redis, { env: { METRICS_NAMESPACE: 'EchoMQ/test' } })
const { invoke } = reaper
const metric = (name: string) => reaper.endpoint.requests.at(-1)?.body.MetricData.find((d) => d.MetricName === name && !d.Dimensions)?.Value
const line = (message: string | RegExp) =>
  reaper.logs.lines.find((l) => (typeof message === 'string' ? l.message === message : message.test(String(l.message))))

describe('sweep errors', () => {
  it('a Redis user that may not run scripts: every queue fails, SweepErrors counts them, the log names the error', async () => {
    await crashedJobs(redis.client, 'emails', 1)
    await crashedJobs(redis.client, 'sms', 1)
    await redis.client.call('ACL', 'SETUSER', 'noscripts', 'on', '>pw', '~*', '&*', '+@all', '-@scripting')

    const summary = await invoke({ REDIS_URL: `redis://noscripts:pw@127.0.0.1:${redis.port}` })

    expect(summary.queues.emails?.error).toMatch(/NOPERM/)
    expect(metric(METRIC_NAMES.SweepRuns)).toBe(1)
    expect(metric(METRIC_NAMES.QueuesSwept)).toBe(2)
    expect(metric(METRIC_NAMES.SweepErrors)).toBe(2)
    expect(reaper.logs.lines.filter((l) => l.message === 'queue' && /NOPERM/.test(String(l.error)))).toHaveLength(2)
    expect(line('summary')).toMatchObject({ queuesSwept: 2, sweepErrors: 2, metricsPublished: true })
  })

  it('a healthy run publishes SweepErrors = 0, so the alarm clears', async () => {
    await crashedJobs(redis.client, 'emails', 1)
    await invoke()
    expect(metric(METRIC_NAMES.SweepErrors)).toBe(0)
    expect(metric(METRIC_NAMES.QueuesSwept)).toBe(1)
  })
})

describe('nothing swept, and why', () => {
  it('a wrong PREFIX: QueuesSwept = 0, and the log line names the prefix that does hold queues', async () => {
    await crashedJobs(redis.client, 'emails', 1)

    const summary = await invoke({ PREFIX: 'app' })

    expect(summary.queues).toEqual({})
    expect(metric(METRIC_NAMES.QueuesSwept)).toBe(0)
    expect(line(/^no queue swept/)).toMatchObject({ level: 'WARN', reason: 'other-prefix', registry: 'app:queues', otherPrefixes: ['emq'] })
  })

  it('a fresh install (no registry under any prefix): no QueuesSwept datum, so no page before the first queue exists', async () => {
    await invoke()
    expect(reaper.endpoint.requests.at(-1)?.body.MetricData.map((d) => d.MetricName)).not.toContain(METRIC_NAMES.QueuesSwept)
    expect(metric(METRIC_NAMES.SweepRuns)).toBe(1)
    expect(line(/^no queue swept/)).toMatchObject({ reason: 'empty-registry', registry: 'emq:queues' })
    // The first queue: counted from then on.
    await crashedJobs(redis.client, 'emails', 1)
    await invoke()
    expect(metric(METRIC_NAMES.QueuesSwept)).toBe(1)
  })

  it('QUEUES naming queues absent from the registry (a wrong PREFIX): swept, not counted, and said so', async () => {
    await crashedJobs(redis.client, 'emails', 1, { prefix: 'app' })

    const summary = await invoke({ QUEUES: 'emails' })

    expect(Object.keys(summary.queues)).toEqual(['emails'])
    expect(metric(METRIC_NAMES.QueuesSwept)).toBe(0)
    expect(line(/^queue emails is not in the registry emq:queues/)).toBeDefined()
    expect(line(/^no queue swept/)).toMatchObject({ reason: 'unregistered' })
  })

  it('QUEUES naming registered queues counts them', async () => {
    await crashedJobs(redis.client, 'emails', 1)
    await invoke({ QUEUES: 'emails' })
    expect(metric(METRIC_NAMES.QueuesSwept)).toBe(1)
    expect(line(/^no queue swept/)).toBeUndefined()
  })
})

describe('a backlog with no worker left', () => {
  it("nothing stalls or fails, and only OldestWaitAge says so, past the backlog alarm's default threshold", async () => {
    const queue = open('emails')
    const sender = worker('emails', async () => 'sent')
    await queue.add('first', {})
    await waitFor(async () => (await queue.counts()).completed === 1, { what: 'the first job done' })
    // Every worker gone; producers go on.
    await sender.close()
    const job = await queue.add('second', {})
    const threshold = METRIC_NAMES.oldestWaitAlarmMsDefault
    // The job has waited past the threshold (its enqueue time, moved back: only time matters here).
    const [seconds] = (await redis.client.time()) as [number, number]
    await redis.client.hset(`emq:{emails}:${job.id}`, 'createdOn', String(seconds * 1000 - threshold - 60_000))
    await queue.close()

    await invoke()

    expect(metric(METRIC_NAMES.OldestWaitAge)).toBeGreaterThan(threshold)
    expect(metric(METRIC_NAMES.WaitingCount)).toBe(1)
    // What every other metric alarm watches stays quiet.
    expect(metric(METRIC_NAMES.StalledMarked)).toBe(0)
    expect(metric(METRIC_NAMES.JobsFailed)).toBe(0)
    expect(metric(METRIC_NAMES.SweepErrors)).toBe(0)
    expect(metric(METRIC_NAMES.QueuesSwept)).toBe(1)
  })
})

describe('failed jobs', () => {
  it('jobs a worker fails on their last attempt count in JobsFailed once: 3, then 0 on the next invocation', async () => {
    const queue = open('emails')
    for (let i = 0; i < 3; i++) await queue.add('job', { i }, { attempts: 1 })
    const failing = worker('emails', () => {
      throw new Error('boom')
    })
    try {
      await waitFor(async () => (await queue.counts()).failed === 3, { timeoutMs: 10_000, what: '3 failed jobs' })
    } finally {
      await failing.close()
    }

    await invoke()
    const first = { jobsFailed: metric(METRIC_NAMES.JobsFailed), failedCount: metric(METRIC_NAMES.FailedCount), line: line('queue') }
    reaper.logs.clear()
    await invoke()

    expect(first.jobsFailed).toBe(3)
    expect(first.failedCount).toBe(3)
    expect(first.line).toMatchObject({ counts: { failed: 3 }, failedNew: 3 })
    expect(metric(METRIC_NAMES.JobsFailed)).toBe(0)
    expect(metric(METRIC_NAMES.FailedCount)).toBe(3)
  })

  it('a stall on the last attempt and a worker error, with an overlapping invocation: each job moved once, each failure published once', async () => {
    const queue = open('emails')
    await queue.add('job', {}, { jobId: 'err', attempts: 1 })
    const failing = worker('emails', () => Promise.reject(new Error('boom')))
    try {
      await waitFor(async () => (await queue.counts()).failed === 1, { what: 'the worker error' })
    } finally {
      await failing.close()
    }
    await stalledBefore(redis.client, 'emails', await crashedJobs(redis.client, 'emails', 2, { attempts: 1, idPrefix: 's' }))

    const totals = await Promise.all([invoke({ SWEEPS_PER_INVOCATION: '3', SWEEP_INTERVAL_MS: '20' }), invoke()])
    // Failures counted while the other invocation held its claim wait for the next invocation.
    await invoke()
    const published = reaper.endpoint.requests.map(
      (r) => r.body.MetricData.find((d) => d.MetricName === METRIC_NAMES.JobsFailed && !d.Dimensions)?.Value ?? 0,
    )

    expect(totals.map((t) => t.queues.emails?.failed ?? 0).reduce((a, b) => a + b, 0)).toBe(2)
    expect(published).toHaveLength(3)
    expect(published.reduce((a, b) => a + b, 0)).toBe(3)
    expect(await queue.counts()).toMatchObject({ failed: 3 })
  })
})
