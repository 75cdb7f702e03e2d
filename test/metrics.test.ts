/** Metrics: the exact PutMetricData (aws-sdk-client-mock), the real client's request at a local endpoint, EMF. */
import { CloudWatchClient, PutMetricDataCommand } from '@aws-sdk/client-cloudwatch'
import { mockClient } from 'aws-sdk-client-mock'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../functions/sweep.js'
import { emfDocuments, MAX_METRICS_PER_CALL, METRIC_NAMES, publishMetrics, type QueueRun } from '../lib/metrics.js'
import { startCloudWatchEndpoint } from './helpers/cloudwatch-endpoint.js'
import { crashedJobs } from './helpers/queue-state.js'
import { startRedis, type TestRedis } from './helpers/redis-server.js'

const when = new Date('2026-11-30T12:00:00Z')
const run = (over: Partial<QueueRun> = {}): QueueRun => ({
  marked: 2,
  recovered: 1,
  failed: 1,
  failedNew: 1,
  durations: [3.5, 4],
  counts: { wait: 5, active: 7, stalled: 2, delayed: 0, completed: 9, failed: 3 },
  ...over,
})
const noLog = () => undefined

describe('PutMetricData (aws-sdk-client-mock)', () => {
  const cw = mockClient(CloudWatchClient)
  beforeEach(() => cw.reset())
  afterAll(() => cw.restore())

  it('sends every metric of an invocation in one call, with the exact data', async () => {
    cw.on(PutMetricDataCommand).resolves({})

    const calls = await publishMetrics(
      { emails: run() },
      { mode: 'api', namespace: 'EchoMQ', client: new CloudWatchClient({}), log: noLog, now: when },
    )

    expect(calls).toBe(1)
    const q = [{ Name: 'Queue', Value: 'emails' }]
    expect(cw.commandCalls(PutMetricDataCommand)[0]?.args[0].input).toEqual({
      Namespace: 'EchoMQ',
      MetricData: [
        { MetricName: 'SweepRuns', Timestamp: when, Unit: 'Count', Value: 1 },
        { MetricName: 'JobsFailed', Timestamp: when, Unit: 'Count', Value: 1 },
        { MetricName: 'FailedCount', Timestamp: when, Unit: 'Count', Value: 3 },
        { MetricName: 'StalledMarked', Timestamp: when, Unit: 'Count', Value: 2, Dimensions: q },
        { MetricName: 'StalledRecovered', Timestamp: when, Unit: 'Count', Value: 1, Dimensions: q },
        { MetricName: 'JobsFailed', Timestamp: when, Unit: 'Count', Value: 1, Dimensions: q },
        { MetricName: 'FailedCount', Timestamp: when, Unit: 'Count', Value: 3, Dimensions: q },
        { MetricName: 'WaitingCount', Timestamp: when, Unit: 'Count', Value: 5, Dimensions: q },
        { MetricName: 'ActiveCount', Timestamp: when, Unit: 'Count', Value: 7, Dimensions: q },
        { MetricName: 'SweepDuration', Timestamp: when, Unit: 'Milliseconds', Values: [3.5, 4], Dimensions: q },
      ],
    })
  })

  it('chunks beyond the per-call limit of 1000 metrics', async () => {
    cw.on(PutMetricDataCommand).resolves({})
    const runs = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`q${i}`, run()]))

    const calls = await publishMetrics(runs, { mode: 'api', namespace: 'EchoMQ', client: new CloudWatchClient({}), log: noLog, now: when })

    const sizes = cw.commandCalls(PutMetricDataCommand).map((c) => c.args[0].input.MetricData?.length)
    expect(calls).toBe(2)
    expect(sizes).toEqual([MAX_METRICS_PER_CALL, 3 + 200 * 7 - MAX_METRICS_PER_CALL])
  })

  it('a CloudWatch failure is logged and does not throw', async () => {
    cw.on(PutMetricDataCommand).rejects(new Error('AccessDenied'))
    const logged: string[] = []
    await expect(
      publishMetrics(
        { emails: run() },
        {
          mode: 'api',
          namespace: 'EchoMQ',
          client: new CloudWatchClient({}),
          log: (_l, m, f) => void logged.push(`${m} ${JSON.stringify(f)}`),
        },
      ),
    ).resolves.toBe(1)
    expect(logged.join()).toMatch(/metrics not published.*AccessDenied/)
  })

  it('mode off sends nothing', async () => {
    expect(
      await publishMetrics({ emails: run() }, { mode: 'off', namespace: 'EchoMQ', client: new CloudWatchClient({}), log: noLog }),
    ).toBe(0)
    expect(cw.commandCalls(PutMetricDataCommand)).toHaveLength(0)
  })
})

describe('EMF', () => {
  it('writes valid Embedded Metric Format documents', () => {
    const docs = emfDocuments({ emails: run(), sms: run({ counts: undefined }) }, 'EchoMQ', when) as Record<string, unknown>[]
    expect(docs).toHaveLength(3)
    for (const doc of docs) {
      const meta = doc._aws as {
        Timestamp: number
        CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string; Unit: string }[] }[]
      }
      expect(meta.Timestamp).toBe(when.getTime())
      expect(meta.CloudWatchMetrics).toHaveLength(1)
      const [directive] = meta.CloudWatchMetrics
      expect(directive?.Namespace).toBe('EchoMQ')
      expect(directive?.Metrics.length).toBeLessThanOrEqual(100)
      for (const set of directive?.Dimensions ?? []) for (const dim of set) expect(typeof doc[dim]).toBe('string')
      for (const metric of directive?.Metrics ?? []) {
        const value = doc[metric.Name]
        expect(typeof value === 'number' || (Array.isArray(value) && value.every((v) => typeof v === 'number'))).toBe(true)
        expect(['Count', 'Milliseconds']).toContain(metric.Unit)
      }
    }
    expect(docs[0]).toMatchObject({ SweepRuns: 1, JobsFailed: 2, FailedCount: 3 })
    expect(docs[1]).toMatchObject({ Queue: 'emails', StalledMarked: 2, SweepDuration: [3.5, 4] })
    expect(Object.keys(docs[2] ?? {})).not.toContain('WaitingCount')
  })
})

describe('the handler sends metrics through the real client to AWS_ENDPOINT_URL_CLOUDWATCH', () => {
  let redis: TestRedis
  let endpoint: Awaited<ReturnType<typeof startCloudWatchEndpoint>>
  beforeAll(async () => {
    redis = await startRedis()
    endpoint = await startCloudWatchEndpoint()
    vi.stubEnv('AWS_ENDPOINT_URL_CLOUDWATCH', endpoint.url)
    vi.stubEnv('AWS_REGION', 'eu-west-1')
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIATEST')
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'test')
  })
  afterAll(async () => {
    vi.unstubAllEnvs()
    await endpoint?.close()
    await redis?.stop()
  })
  afterEach(() => vi.restoreAllMocks())

  it('one PutMetricData request per invocation, decoded from the wire', async () => {
    vi.spyOn(console, 'log').mockImplementation(() => undefined)
    await crashedJobs(redis.client, 'emails', 2, { attempts: 1 })
    const handler = createHandler({
      REDIS_URL: redis.url,
      SWEEP_GRACE_MS: '0',
      SWEEPS_PER_INVOCATION: '2',
      SWEEP_INTERVAL_MS: '10',
      METRICS_NAMESPACE: 'EchoMQ/Test',
    })

    await handler({}, { getRemainingTimeInMillis: () => 50_000 })
    await handler.close()

    expect(endpoint.requests).toHaveLength(1)
    const [request] = endpoint.requests
    expect(request?.target).toBe('GraniteServiceVersion20100801.PutMetricData')
    expect(request?.body.Namespace).toBe('EchoMQ/Test')
    const byName = (name: string, queue?: string) =>
      request?.body.MetricData.find((d) => d.MetricName === name && (queue ? d.Dimensions?.[0]?.Value === queue : !d.Dimensions))
    expect(byName(METRIC_NAMES.SweepRuns)?.Value).toBe(1)
    expect(byName(METRIC_NAMES.StalledMarked, 'emails')?.Value).toBe(2)
    expect(byName(METRIC_NAMES.JobsFailed, 'emails')?.Value).toBe(2)
    expect(byName(METRIC_NAMES.FailedCount, 'emails')?.Value).toBe(2)
    expect(byName(METRIC_NAMES.SweepDuration, 'emails')?.Values).toHaveLength(2)
  })

  it('METRICS_MODE=emf writes EMF lines to stdout and calls no API', async () => {
    const lines: string[] = []
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk))
      return true
    })
    vi.spyOn(console, 'log').mockImplementation(() => undefined)
    const before = endpoint.requests.length
    const handler = createHandler({ REDIS_URL: redis.url, METRICS_MODE: 'emf', QUEUES: 'emails' })

    await handler({}, { getRemainingTimeInMillis: () => 50_000 })
    await handler.close()

    expect(endpoint.requests.length).toBe(before)
    const docs = lines.map((l) => JSON.parse(l) as { _aws?: unknown; Queue?: string })
    expect(docs.filter((d) => d._aws)).toHaveLength(2)
    expect(docs.some((d) => d.Queue === 'emails')).toBe(true)
  })
})
