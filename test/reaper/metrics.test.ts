/**
 * Metrics: the exact PutMetricData (aws-sdk-client-mock), the real client's requests at a local endpoint
 * (a failure, a blackhole), EMF, and the handler's metrics from real sweeps.
 */
import { CloudWatchClient, PutMetricDataCommand } from '@aws-sdk/client-cloudwatch'
import { mockClient } from 'aws-sdk-client-mock'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import {
  emfDocuments,
  MAX_METRICS_PER_CALL,
  METRIC_NAMES,
  metricsClient,
  PUBLISH_TIMEOUT_MS,
  publishMetrics,
} from '../../lib/reaper/metrics.js'
import { emptyRun, type QueueRun, totals } from '../../lib/reaper/run.js'
import { CLOUDWATCH_REQUEST_ID, type CloudWatchEndpoint, startBlackhole, startCloudWatchEndpoint } from '../helpers/cloudwatch-endpoint.js'
import { stubLocalAws } from '../helpers/local-aws.js'
import { type CapturedLogs, captureLogs } from '../helpers/log-lines.js'
import { crashedJobs, stalledBefore } from '../helpers/queue-state.js'
import { startRedis, type TestRedis } from '../helpers/redis-server.js'

const when = new Date('2026-11-30T12:00:00Z')
const run = (over: { [K in keyof QueueRun]?: QueueRun[K] | undefined } = {}): QueueRun =>
  ({
    marked: 2,
    recovered: 1,
    failed: 1,
    failedNew: 4,
    promoted: 0,
    trimmed: 0,
    durations: [3.5, 4],
    counts: { wait: 5, prioritized: 0, active: 7, stalled: 2, delayed: 6, completed: 9, failed: 3 },
    oldestWaitAgeMs: 1500,
    ...over,
  }) as QueueRun
const noLog = () => undefined
/** The twelve totals, in the order they are sent. */
const TOTALS = [
  'SweepRuns',
  'QueuesSwept',
  'SweepErrors',
  'StalledMarked',
  'StalledRecovered',
  'JobsFailed',
  'WaitingCount',
  'ActiveCount',
  'DelayedCount',
  'FailedCount',
  'OldestWaitAge',
  'SweepDuration',
]

describe('totals', () => {
  it('JobsFailed sums failedNew (every job that entered failed), not only the sweeps’ own moves', () => {
    const t = totals({ a: run({ failed: 1, failedNew: 4 }), b: run({ failed: 0, failedNew: 3 }), c: run({ failedNew: undefined }) })
    expect(t.jobsFailed).toBe(7)
  })

  it('counts errors, sums sizes over the queues read, keeps the oldest wait and the slowest queue of each sweep', () => {
    const t = totals({
      a: run({ durations: [1, 9], oldestWaitAgeMs: 100 }),
      b: run({ durations: [5, 2], oldestWaitAgeMs: 900 }),
      broken: { ...emptyRun(), error: 'NOPERM', errorCode: 'ERR_NOPERM' },
    })
    expect(t).toEqual({
      queuesSwept: 3,
      sweepErrors: 1,
      marked: 4,
      recovered: 2,
      jobsFailed: 8,
      promoted: 0,
      trimmed: 0,
      counts: { wait: 10, active: 14, delayed: 12, failed: 6 },
      oldestWaitAgeMs: 900,
      sweepDurationsMs: [5, 9],
    })
  })

  it('an empty wait has an age of 0; a waiting job of unknown age is not reported as 0', () => {
    const empty = { wait: 0, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 0 }
    expect(totals({ a: run({ oldestWaitAgeMs: undefined, counts: empty }) }).oldestWaitAgeMs).toBe(0)
    expect(totals({ a: run({ oldestWaitAgeMs: undefined }) }).oldestWaitAgeMs).toBeUndefined()
  })

  it('a listed queue missing from the registry is swept but not counted in QueuesSwept', () => {
    expect(totals({ a: run(), b: run() }, new Set(['b'])).queuesSwept).toBe(1)
  })
})

describe('PutMetricData (aws-sdk-client-mock)', () => {
  const cw = mockClient(CloudWatchClient)
  beforeEach(() => cw.reset())
  afterAll(() => cw.restore())

  it('by default sends the twelve totals, without dimensions, in one call, with the exact data', async () => {
    cw.on(PutMetricDataCommand).resolves({})

    const result = await publishMetrics(
      { emails: run() },
      { mode: 'api', namespace: 'EchoMQ/test', client: new CloudWatchClient({}), log: noLog, now: when },
    )

    expect(result).toEqual({ calls: 1, published: true, jobsFailedPublished: true })
    const c = (MetricName: string, Value: number) => ({ MetricName, Timestamp: when, Unit: 'Count', Value })
    expect(cw.commandCalls(PutMetricDataCommand)[0]?.args[0].input).toEqual({
      Namespace: 'EchoMQ/test',
      MetricData: [
        c('SweepRuns', 1),
        c('QueuesSwept', 1),
        c('SweepErrors', 0),
        c('StalledMarked', 2),
        c('StalledRecovered', 1),
        c('JobsFailed', 4),
        c('WaitingCount', 5),
        c('ActiveCount', 7),
        c('DelayedCount', 6),
        c('FailedCount', 3),
        { MetricName: 'OldestWaitAge', Timestamp: when, Unit: 'Milliseconds', Value: 1500 },
        { MetricName: 'SweepDuration', Timestamp: when, Unit: 'Milliseconds', Values: [3.5, 4] },
      ],
    })
  })

  it('the number of metrics does not grow with the number of queues (300 queues: still 12)', async () => {
    cw.on(PutMetricDataCommand).resolves({})
    const runs = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`q${i}`, run()]))

    await publishMetrics(runs, { mode: 'api', namespace: 'EchoMQ', client: new CloudWatchClient({}), log: noLog, now: when })

    const data = cw.commandCalls(PutMetricDataCommand).flatMap((call) => call.args[0].input.MetricData ?? [])
    expect(data.map((d) => d.MetricName)).toEqual(TOTALS)
    expect(data.every((d) => d.Dimensions === undefined)).toBe(true)
    expect(data.find((d) => d.MetricName === 'QueuesSwept')?.Value).toBe(300)
  })

  it('perQueue adds ten metrics per queue (dimension Queue), chunked at 1000 a call', async () => {
    cw.on(PutMetricDataCommand).resolves({})
    const runs = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`q${i}`, run()]))

    const result = await publishMetrics(runs, {
      mode: 'api',
      namespace: 'EchoMQ',
      client: new CloudWatchClient({}),
      log: noLog,
      perQueue: true,
    })

    const sizes = cw.commandCalls(PutMetricDataCommand).map((c) => c.args[0].input.MetricData?.length)
    expect(result.calls).toBe(3)
    expect(sizes).toEqual([MAX_METRICS_PER_CALL, MAX_METRICS_PER_CALL, 12 + 200 * 10 - 2 * MAX_METRICS_PER_CALL])
    const q7 = cw
      .commandCalls(PutMetricDataCommand)
      .flatMap((c) => c.args[0].input.MetricData ?? [])
      .filter((d) => d.Dimensions?.[0]?.Value === 'q7')
    expect(q7.map((d) => d.MetricName).sort()).toEqual(TOTALS.filter((n) => !['SweepRuns', 'QueuesSwept'].includes(n)).sort())
  })

  it('a later call failing (per-queue figures) leaves JobsFailed published: it went with the totals in the first', async () => {
    cw.on(PutMetricDataCommand)
      .resolvesOnce({})
      .rejects(Object.assign(new Error('Rate exceeded'), { name: 'Throttling' }))
    const runs = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`q${i}`, run()]))

    const result = await publishMetrics(runs, {
      mode: 'api',
      namespace: 'EchoMQ',
      client: new CloudWatchClient({}),
      log: noLog,
      perQueue: true,
    })

    const first = cw.commandCalls(PutMetricDataCommand)[0]?.args[0].input.MetricData ?? []
    expect(result).toMatchObject({ calls: 2, published: false, jobsFailedPublished: true })
    expect(first.find((d) => d.MetricName === 'JobsFailed' && !d.Dimensions)?.Value).toBe(800)
  })

  it('a failed call is logged with the error name, HTTP status and request id, and does not throw', async () => {
    const denied = Object.assign(new Error('User is not authorized to perform cloudwatch:PutMetricData'), {
      name: 'AccessDenied',
      $metadata: { httpStatusCode: 403, requestId: 'req-123' },
    })
    cw.on(PutMetricDataCommand).rejects(denied)
    const logged: { level: string; message: string; fields?: object | undefined }[] = []

    const result = await publishMetrics(
      { emails: run() },
      {
        mode: 'api',
        namespace: 'EchoMQ',
        client: new CloudWatchClient({}),
        log: (level, message, fields) => void logged.push({ level, message, fields }),
      },
    )

    expect(result).toMatchObject({
      calls: 1,
      published: false,
      jobsFailedPublished: false,
      error: { errorName: 'AccessDenied', httpStatus: 403, requestId: 'req-123' },
    })
    expect(logged).toEqual([
      {
        level: 'error',
        message: 'metrics not published; the sweep itself is unaffected',
        fields: { namespace: 'EchoMQ', errorName: 'AccessDenied', error: denied.message, httpStatus: 403, requestId: 'req-123' },
      },
    ])
  })

  it('mode off sends nothing', async () => {
    const result = await publishMetrics(
      { emails: run() },
      { mode: 'off', namespace: 'EchoMQ', client: new CloudWatchClient({}), log: noLog },
    )
    expect(result).toEqual({ calls: 0, published: false, jobsFailedPublished: false })
    expect(cw.commandCalls(PutMetricDataCommand)).toHaveLength(0)
  })
})

describe('EMF', () => {
  type Doc = Record<string, unknown> & {
    _aws: {
      Timestamp: number
      CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string; Unit: string }[] }[]
    }
  }
  const valid = (doc: Doc) => {
    expect(doc._aws.Timestamp).toBe(when.getTime())
    expect(doc._aws.CloudWatchMetrics).toHaveLength(1)
    const [directive] = doc._aws.CloudWatchMetrics
    expect(directive?.Metrics.length).toBeLessThanOrEqual(100)
    for (const set of directive?.Dimensions ?? []) for (const dim of set) expect(typeof doc[dim]).toBe('string')
    for (const metric of directive?.Metrics ?? []) {
      const value = doc[metric.Name]
      expect(typeof value === 'number' || (Array.isArray(value) && value.length <= 100 && value.every((v) => typeof v === 'number'))).toBe(
        true,
      )
      expect(['Count', 'Milliseconds']).toContain(metric.Unit)
    }
  }

  it('by default one document of totals without dimensions, whatever the number of queues; service is a field', () => {
    const docs = emfDocuments(
      { emails: run(), sms: run({ counts: undefined }) },
      { namespace: 'EchoMQ/dev', timestamp: when, service: 'billing' },
    ) as Doc[]
    expect(docs).toHaveLength(1)
    const [doc] = docs as [Doc]
    valid(doc)
    expect(doc._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([[]])
    expect(doc._aws.CloudWatchMetrics[0]?.Metrics.map((m) => m.Name)).toEqual(TOTALS)
    expect(doc).toMatchObject({ service: 'billing', SweepRuns: 1, QueuesSwept: 2, JobsFailed: 8, WaitingCount: 5, OldestWaitAge: 1500 })
  })

  it('perQueue adds one document per queue with dimension Queue', () => {
    const docs = emfDocuments(
      { emails: run(), sms: run({ counts: undefined }) },
      { namespace: 'EchoMQ', timestamp: when, perQueue: true },
    ) as Doc[]
    expect(docs).toHaveLength(3)
    for (const doc of docs) valid(doc)
    expect(docs[1]).toMatchObject({ Queue: 'emails', StalledMarked: 2, JobsFailed: 4, SweepDuration: [3.5, 4] })
    expect(Object.keys(docs[2] ?? {})).not.toContain('WaitingCount')
  })
})

describe('the real client at a local endpoint', () => {
  let endpoint: CloudWatchEndpoint
  beforeAll(async () => {
    endpoint = await startCloudWatchEndpoint()
    stubLocalAws()
  })
  afterAll(async () => {
    vi.unstubAllEnvs()
    await endpoint?.close()
  })

  it('an AWS error reply is logged with the name, status and request id the SDK read from the wire', async () => {
    vi.stubEnv('AWS_ENDPOINT_URL_CLOUDWATCH', endpoint.url)
    endpoint.failWith({ status: 400, type: 'InvalidParameterValue', message: 'The value for parameter Namespace is invalid' })
    const logged: object[] = []
    try {
      const result = await publishMetrics(
        { emails: run() },
        { mode: 'api', namespace: 'EchoMQ', client: await metricsClient(), log: (_l, _m, f) => void logged.push(f ?? {}) },
      )
      expect(result.published).toBe(false)
    } finally {
      endpoint.failWith(undefined)
    }
    expect(logged).toEqual([
      expect.objectContaining({
        errorName: expect.stringMatching(/^InvalidParameterValue/),
        httpStatus: 400,
        requestId: CLOUDWATCH_REQUEST_ID,
        error: expect.stringMatching(/Namespace/),
      }),
    ])
  })

  it('with no route (an endpoint that never answers), the publish gives up within its deadline and says why', async () => {
    const blackhole = await startBlackhole()
    vi.stubEnv('AWS_ENDPOINT_URL_CLOUDWATCH', blackhole.url)
    const logged: Record<string, unknown>[] = []
    const started = performance.now()
    try {
      const result = await publishMetrics(
        { emails: run() },
        {
          mode: 'api',
          namespace: 'EchoMQ',
          client: await metricsClient(),
          log: (_l, _m, f) => void logged.push(f as Record<string, unknown>),
        },
      )
      expect(result.published).toBe(false)
    } finally {
      await blackhole.close()
    }
    expect(performance.now() - started).toBeLessThan(PUBLISH_TIMEOUT_MS + 1_000)
    expect(logged[0]).toMatchObject({ timeoutMs: PUBLISH_TIMEOUT_MS, hint: expect.stringMatching(/emf/) })
    expect(['AbortError', 'TimeoutError']).toContain(logged[0]?.errorName)
  })
})

describe('the handler publishes what its sweeps did', () => {
  let redis: TestRedis
  let endpoint: CloudWatchEndpoint
  let captured: CapturedLogs
  beforeAll(async () => {
    redis = await startRedis()
    endpoint = await startCloudWatchEndpoint()
    stubLocalAws({ AWS_ENDPOINT_URL_CLOUDWATCH: endpoint.url })
  })
  beforeEach(async () => {
    await redis.client.flushall()
    endpoint.requests.length = 0
    captured = captureLogs()
  })
  afterAll(async () => {
    vi.unstubAllEnvs()
    await endpoint?.close()
    await redis?.stop()
  })
  afterEach(() => vi.restoreAllMocks())
  const invoke = async (env: Record<string, string>) => {
    const handler = createHandler({ REDIS_URL: redis.url, SWEEP_GRACE_MS: '0', ...env })
    try {
      return await handler({}, { getRemainingTimeInMillis: () => 50_000 })
    } finally {
      await handler.close()
    }
  }
  const metric = (name: string) => endpoint.requests[0]?.body.MetricData.find((d) => d.MetricName === name && !d.Dimensions)

  it('one PutMetricData request per invocation, totals decoded from the wire', async () => {
    await stalledBefore(redis.client, 'emails', await crashedJobs(redis.client, 'emails', 2, { attempts: 1 }))
    await crashedJobs(redis.client, 'sms', 1)

    await invoke({ SWEEPS_PER_INVOCATION: '2', SWEEP_INTERVAL_MS: '10', METRICS_NAMESPACE: 'EchoMQ/test' })

    expect(endpoint.requests).toHaveLength(1)
    expect(endpoint.requests[0]?.target).toBe('GraniteServiceVersion20100801.PutMetricData')
    expect(endpoint.requests[0]?.body.Namespace).toBe('EchoMQ/test')
    expect(endpoint.requests[0]?.body.MetricData.map((d) => d.MetricName)).toEqual(TOTALS)
    expect(metric(METRIC_NAMES.SweepRuns)?.Value).toBe(1)
    expect(metric(METRIC_NAMES.QueuesSwept)?.Value).toBe(2)
    expect(metric(METRIC_NAMES.SweepErrors)?.Value).toBe(0)
    expect(metric(METRIC_NAMES.StalledMarked)?.Value).toBe(3)
    expect(metric(METRIC_NAMES.FailedCount)?.Value).toBe(2)
    expect(metric(METRIC_NAMES.SweepDuration)?.Values).toHaveLength(2)
    const queueLines = captured.lines.filter((l) => l.message === 'queue')
    expect(queueLines.map((l) => l.queue).sort()).toEqual(['emails', 'sms'])
    expect(queueLines.find((l) => l.queue === 'emails')).toMatchObject({ marked: 2, failed: 2, counts: { failed: 2 }, sweeps: 2 })
  })

  it('PER_QUEUE_METRICS=true adds each queue’s figures with dimension Queue', async () => {
    await crashedJobs(redis.client, 'emails', 2)

    await invoke({ PER_QUEUE_METRICS: 'true' })

    const perQueue = endpoint.requests[0]?.body.MetricData.filter((d) => d.Dimensions?.[0]?.Value === 'emails') ?? []
    expect(perQueue.find((d) => d.MetricName === METRIC_NAMES.StalledMarked)?.Value).toBe(2)
    expect(perQueue).toHaveLength(10)
  })

  it('a failed publish leaves the sweep’s result alone and the summary line says so', async () => {
    await crashedJobs(redis.client, 'emails', 1)
    endpoint.failWith({ status: 500, type: 'InternalServiceError', message: 'boom' })
    try {
      const summary = await invoke({})
      expect(summary.queues.emails?.marked).toBe(1)
    } finally {
      endpoint.failWith(undefined)
    }
    expect(captured.line('summary')).toMatchObject({ metrics: 'api', metricsPublished: false })
    expect(captured.line(/^metrics not published/)).toMatchObject({
      httpStatus: 500,
      requestId: CLOUDWATCH_REQUEST_ID,
    })
  })

  it('POWERTOOLS_METRICS_NAMESPACE names the namespace when METRICS_NAMESPACE is unset', async () => {
    await invoke({ POWERTOOLS_METRICS_NAMESPACE: 'Team/Queues', QUEUES: 'a' })
    expect(endpoint.requests[0]?.body.Namespace).toBe('Team/Queues')
  })

  it.each([
    ['POWERTOOLS_METRICS_DISABLED=true, whatever METRICS_MODE says', { POWERTOOLS_METRICS_DISABLED: 'true', METRICS_MODE: 'api' }],
    ['IS_LOCAL=true (serverless invoke local) without METRICS_MODE', { IS_LOCAL: 'true' }],
  ])('no metrics with %s', async (_label, env) => {
    await invoke({ ...env, QUEUES: 'a' })
    expect(endpoint.requests).toHaveLength(0)
    expect(captured.line('summary')).toMatchObject({ metrics: 'off' })
  })

  it('METRICS_MODE=emf writes one EMF line (with the POWERTOOLS_SERVICE_NAME field) to stdout and calls no API', async () => {
    await invoke({ METRICS_MODE: 'emf', QUEUES: 'emails', POWERTOOLS_SERVICE_NAME: 'billing' })

    expect(endpoint.requests).toHaveLength(0)
    const docs = captured.lines.filter((d) => d._aws)
    expect(docs).toHaveLength(1)
    expect(docs[0]).toMatchObject({ stream: 'stdout', service: 'billing', SweepRuns: 1 })
  })
})
