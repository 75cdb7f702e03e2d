/**
 * The on-call promises of issue 18, each finding reproduced against real Redis, with metrics caught at a
 * local CloudWatch endpoint by the real SDK client: failed jobs counted once across a failed publish (with
 * overlapping and killed invocations: reaper-jobs-failed.test.ts), the sweep's own failures counted in the
 * same invocation, the oldest wait after a recovery, one structured error line per failed invocation, the
 * log lines' shape, and the Logs Insights queries of docs/reaper.md and the template's metric filter run against
 * those lines.
 */
import { describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { METRIC_NAMES } from '../../lib/reaper/metrics.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useQueues } from '../helpers/fixture.js'
import type { LogLine } from '../helpers/log-lines.js'
import { docQueries, logsInsights, metricFilterMatches } from '../helpers/logs-insights.js'
import { crashedJobs, failJobs, stalledBefore } from '../helpers/queue-state.js'
import { useReaperInvocations } from '../helpers/reaper-invocations.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const queues = useQueues(redis)
const reaper = useReaperInvocations(redis, {
  env: { METRICS_NAMESPACE: 'EchoMQ/test' },
  context: { awsRequestId: 'req-1', functionName: 'echomq-reaper-test-sweep' },
})
const { invoke } = reaper
const published = (name: string) =>
  reaper.endpoint.requests.map((r) => r.body.MetricData.find((d) => d.MetricName === name && !d.Dimensions)?.Value ?? 0)
const failedNewInRedis = async (queue: string) => Number((await redis.client.hget(queueKeys('emq', queue).meta, 'failedNew')) ?? 0)

describe('JobsFailed: a count leaves Redis only once published (finding 2)', () => {
  it('CloudWatch failing, then healthy: the 4 failures are published once, by the invocation that could', async () => {
    await failJobs(queues, 'emails', 4)

    reaper.endpoint.failWith({ status: 500, type: 'InternalServiceError', message: 'boom' })
    await invoke()
    const afterFailure = {
      inRedis: await failedNewInRedis('emails'),
      summary: reaper.logs.line('summary'),
      queue: reaper.logs.line('queue'),
    }
    reaper.endpoint.failWith(undefined)
    reaper.endpoint.requests.length = 0
    await invoke()
    await invoke()

    expect(afterFailure.summary).toMatchObject({ metricsPublished: false, jobsFailed: 0, jobsFailedNotPublished: 4 })
    expect(afterFailure.queue).toMatchObject({ failedNew: 0, failedNotPublished: 4 })
    expect(afterFailure.inRedis).toBe(4)
    expect(published(METRIC_NAMES.JobsFailed)).toEqual([4, 0])
    expect(await failedNewInRedis('emails')).toBe(0)
  })
})

describe('the sweep as it happens (finding 8)', () => {
  it('jobs the sweep itself fails are counted in the same invocation', async () => {
    await stalledBefore(redis.client, 'emails', await crashedJobs(redis.client, 'emails', 2, { attempts: 1 }))
    // Two sweeps: the first marks, the second fails them (no attempt left).
    await invoke({ SWEEPS_PER_INVOCATION: '2', SWEEP_INTERVAL_MS: '10' })
    expect(published(METRIC_NAMES.JobsFailed)).toEqual([2])
    expect(reaper.logs.line('queue')).toMatchObject({ failed: 2, failedNew: 2 })
  })

  it('OldestWaitAge right after a recovery: 3 jobs wait, and their wait began when their leases expired', async () => {
    await crashedJobs(redis.client, 'emails', 3)
    await invoke()
    const expiredAtLeast = performance.now()
    await waitFor(() => performance.now() - expiredAtLeast >= 50, { what: '50 ms' })
    reaper.endpoint.requests.length = 0
    reaper.logs.clear()

    await invoke()

    expect(reaper.logs.line('queue')).toMatchObject({ recovered: 3, counts: { wait: 3 } })
    const [age] = published(METRIC_NAMES.OldestWaitAge)
    expect(age).toBeGreaterThanOrEqual(50)
    expect(reaper.logs.line('queue')?.oldestWaitAgeMs).toBe(age)
  })
})

describe('a failed invocation leaves one error line of its own (finding 6)', () => {
  it.each([
    ['a port outside 1-65535: a configuration error before any connection', { REDIS_URL: 'redis://127.0.0.1:99999' }, 'ERR_CONFIG'],
    ['a Redis that refuses connections', { REDIS_URL: 'redis://127.0.0.1:1', REDIS_TIMEOUT_MS: '300' }, 'ERR_CONNECTION'],
    ['an event with an unknown field', {}, 'ERR_EVENT'],
  ])('%s', async (label, env, code) => {
    const handler = createHandler({ ...reaper.env(), ...env })
    const event = code === 'ERR_EVENT' ? { queue: 'emails' } : {}
    const err = await handler(event, reaper.context).catch((e: unknown) => e)
    await handler.close()

    expect(err).toMatchObject({ code })
    const errors = reaper.logs.lines.filter((l) => l.level === 'ERROR')
    expect(errors, label).toHaveLength(1)
    expect(errors[0]).toMatchObject({ stream: 'stderr', message: 'invocation failed', errorCode: code, function_request_id: 'req-1' })
    if (code === 'ERR_CONFIG') expect(errors[0]).toMatchObject({ variable: 'REDIS_URL', error: expect.stringMatching(/port 99999/) })
    if (code === 'ERR_CONNECTION') expect(errors[0]?.error).toMatch(/unreachable/)
  })

  it('a wrong password is ERR_AUTH with a hint, not "unreachable"', async () => {
    await redis.client.call('ACL', 'SETUSER', 'reaper', 'on', '>right', '~*', '+@all')
    const err = await invoke({ REDIS_URL: `redis://reaper:wrong@127.0.0.1:${redis.port}`, REDIS_TIMEOUT_MS: '500' }).catch(
      (e: unknown) => e,
    )
    expect(err).toMatchObject({ code: 'ERR_AUTH', hint: expect.stringMatching(/user and password/) })
    expect(reaper.logs.line('invocation failed')).toMatchObject({ errorCode: 'ERR_AUTH', hint: expect.stringMatching(/user and password/) })
    expect(reaper.logs.text.join('\n')).not.toMatch(/unreachable|wrong@/)
  })
})

describe('log lines as Powertools writes them (finding 7)', () => {
  it('RFC 3339 timestamp, level, service, request id and cold start on every line; WARN and ERROR on stderr', async () => {
    vi.stubEnv('AWS_LAMBDA_INITIALIZATION_TYPE', 'on-demand')
    await crashedJobs(redis.client, 'emails', 1)
    await invoke({ POWERTOOLS_SERVICE_NAME: 'echomq-reaper-test', PREFIX: 'wrong' })
    await invoke({ POWERTOOLS_SERVICE_NAME: 'echomq-reaper-test' })

    expect(reaper.logs.lines.length).toBeGreaterThan(3)
    for (const line of reaper.logs.lines.filter((l) => !l._aws)) {
      expect(line).toMatchObject({ service: 'echomq-reaper-test', function_request_id: 'req-1', function_name: 'echomq-reaper-test-sweep' })
      expect(line.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/)
      expect(['INFO', 'WARN', 'ERROR']).toContain(line.level)
      expect(line.stream).toBe(line.level === 'INFO' ? 'stdout' : 'stderr')
      expect(typeof line.cold_start).toBe('boolean')
    }
    expect(reaper.logs.line(/^no queue swept/)).toMatchObject({ level: 'WARN', stream: 'stderr', cold_start: true })
    expect(reaper.logs.text.filter((t) => !t.startsWith('{'))).toEqual([])
  })

  it("docs/reaper.md's Logs Insights queries and the metric filter, run on the lines themselves", async () => {
    await stalledBefore(redis.client, 'emails', await crashedJobs(redis.client, 'emails', 2, { attempts: 1 }))
    await crashedJobs(redis.client, 'sms', 1)
    queues.open('broken')
    await redis.client.set(queueKeys('emq', 'broken').active, 'not a sorted set')
    reaper.endpoint.failWith({ status: 400, type: 'Throttling', message: 'Rate exceeded' })
    await invoke({ SWEEPS_PER_INVOCATION: '2', SWEEP_INTERVAL_MS: '10' })
    reaper.endpoint.failWith(undefined)
    await invoke()
    await invoke({ REDIS_URL: 'redis://127.0.0.1:99999' }).catch(() => undefined)

    const queries = docQueries()
    const run = (name: string) => logsInsights(queries[name] ?? '', reaper.logs.lines as LogLine[])
    // Only the queues where something happened: emails' jobs failed, sms's was marked; broken failed.
    expect(run('per queue')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ queue: 'emails', failed: 2 }),
        expect.objectContaining({ queue: 'sms', marked: 1 }),
      ]),
    )
    expect(run('backlog').length).toBe(2)
    expect(run('sweep errors')).toEqual([expect.objectContaining({ queue: 'broken', errorCode: 'ERR_WRONG_TYPE' })])
    expect(run('failed invocations')).toEqual([expect.objectContaining({ errorCode: 'ERR_CONFIG', count: 1 })])
    expect(run('metrics not published')).toEqual([expect.objectContaining({ errorName: 'Throttling', count: 1 })])
    const summaries = reaper.logs.lines.filter((l) => l.message === 'summary')
    expect(summaries.map((l) => metricFilterMatches(METRICS_UNPUBLISHED_PATTERN, l))).toEqual([true, false])
  })
})

const METRICS_UNPUBLISHED_PATTERN = '{ ($.message = "summary") && ($.metricsPublished IS FALSE) }'
