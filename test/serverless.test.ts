/**
 * `serverless package` offline (dummy credentials) and the CloudFormation template it writes, then
 * `serverless invoke local` against a test Redis. One file, so the two never share .esbuild/ at once.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { METRIC_NAMES } from '../lib/metrics.js'
import { crashedJobs } from './helpers/queue-state.js'
import { startRedis, type TestRedis } from './helpers/redis-server.js'

const run = promisify(execFile)
const root = new URL('..', import.meta.url).pathname
const slsEnv = {
  ...process.env,
  AWS_ACCESS_KEY_ID: 'AKIAOFFLINETEST',
  AWS_SECRET_ACCESS_KEY: 'offline',
  AWS_REGION: 'eu-west-1',
  SLS_TELEMETRY_DISABLED: '1',
  SLS_NOTIFICATIONS_MODE: 'off',
}

type Resource = { Type: string; Properties: Record<string, unknown>; Condition?: string }
let resources: Record<string, Resource>
let outputs: Record<string, unknown>
const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type)

describe('serverless package', () => {
  beforeAll(async () => {
    await run('npm', ['run', 'package'], { cwd: root, env: slsEnv, timeout: 120_000 })
    const template = JSON.parse(readFileSync(`${root}.serverless/cloudformation-template-update-stack.json`, 'utf8'))
    resources = template.Resources
    outputs = template.Outputs
  }, 150_000)

  it('a Node 22 arm64 function with a timeout under the one-minute schedule and reserved concurrency 1', () => {
    const fn = resources.SweepLambdaFunction?.Properties ?? {}
    expect(fn.Runtime).toBe('nodejs22.x')
    expect(fn.Architectures).toEqual(['arm64'])
    expect(fn.Timeout).toBeLessThan(60)
    expect(fn.ReservedConcurrentExecutions).toBe(1)
    expect(fn.Handler).toBe('functions/sweep.handler')
    expect(fn).not.toHaveProperty('VpcConfig') // no VPC unless subnets and security groups are given
  })

  it('runs every minute, with no retries and a maximum event age of 60 s', () => {
    const [[, rule] = []] = ofType('AWS::Events::Rule')
    expect(rule?.Properties.ScheduleExpression).toBe('rate(1 minute)')
    const [[, invokeConfig] = []] = ofType('AWS::Lambda::EventInvokeConfig')
    expect(invokeConfig?.Properties).toMatchObject({ MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60 })
  })

  it('may call cloudwatch:PutMetricData only, in its namespace, and nothing else beyond its logs', () => {
    const role = resources.IamRoleLambdaExecution?.Properties as {
      Policies: { PolicyDocument: { Statement: { Action: string[] | string; Condition?: unknown }[] } }[]
      ManagedPolicyArns?: unknown
    }
    const statements = role.Policies.flatMap((p) => p.PolicyDocument.Statement)
    const actions = statements.flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]))
    expect(actions.filter((a) => !a.startsWith('logs:'))).toEqual(['cloudwatch:PutMetricData'])
    const metricStatement = statements.find((s) => [s.Action].flat().includes('cloudwatch:PutMetricData'))
    expect(metricStatement?.Condition).toEqual({ StringEquals: { 'cloudwatch:namespace': METRIC_NAMES.namespaceDefault } })
    expect(role.ManagedPolicyArns ?? []).toEqual([])
  })

  it('alarms watch the metric names and namespace the code emits', () => {
    const alarms = Object.fromEntries(ofType('AWS::CloudWatch::Alarm').map(([id, r]) => [id, r.Properties]))
    expect(alarms.JobsFailedAlarm).toMatchObject({
      Namespace: METRIC_NAMES.namespaceDefault,
      MetricName: METRIC_NAMES.JobsFailed,
      Period: 60,
      TreatMissingData: 'notBreaching',
    })
    expect(alarms.JobsFailedAlarm).not.toHaveProperty('Dimensions')
    expect(alarms.FailedBacklogAlarm).toMatchObject({ Namespace: METRIC_NAMES.namespaceDefault, MetricName: METRIC_NAMES.FailedCount })
    expect(alarms.SweeperSilentAlarm).toMatchObject({
      Namespace: METRIC_NAMES.namespaceDefault,
      MetricName: METRIC_NAMES.SweepRuns,
      Period: 60,
      EvaluationPeriods: 3,
      TreatMissingData: 'breaching',
      ComparisonOperator: 'LessThanThreshold',
    })
    expect(alarms.FunctionErrorsAlarm).toMatchObject({ Namespace: 'AWS/Lambda', MetricName: 'Errors' })
    for (const alarm of Object.values(alarms)) expect(alarm.AlarmActions).toEqual([{ Ref: 'AlarmTopic' }])
  })

  it('an SNS topic, an e-mail subscription only when an address is given, a dashboard and outputs naming them', () => {
    expect(resources.AlarmTopic?.Type).toBe('AWS::SNS::Topic')
    expect(resources.AlarmEmailSubscription?.Condition).toBe('HasAlarmEmail')
    const body = JSON.stringify(resources.Dashboard?.Properties.DashboardBody)
    for (const name of [
      'StalledMarked',
      'StalledRecovered',
      'JobsFailed',
      'WaitingCount',
      'ActiveCount',
      'FailedCount',
      'SweepDuration',
      'SweepRuns',
    ] as const) {
      expect(body).toContain(METRIC_NAMES[name])
    }
    expect(Object.keys(outputs)).toEqual(expect.arrayContaining(['AlarmTopicArn', 'DashboardName']))
  })

  it('the package holds the bundle and the Lua scripts', async () => {
    const { stdout } = await run('unzip', ['-l', `${root}.serverless/echomq-reaper.zip`])
    expect(stdout).toContain('functions/sweep.cjs')
    expect(stdout).toContain('lua/sweep-6.lua')
  })
})

describe('serverless invoke local', () => {
  let redis: TestRedis
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  it('sweeps a local Redis and the process exits', async () => {
    await crashedJobs(redis.client, 'emails', 2)
    const { stdout } = await run(
      'npx',
      ['serverless', 'invoke', 'local', '-f', 'sweep', '--param', 'metricsMode=off', '--param', 'sweepGraceMs=0', '-d', '{}'],
      { cwd: root, env: { ...slsEnv, REDIS_URL: redis.url }, timeout: 90_000 },
    )
    expect(stdout).toMatch(/"message":"sweep","queue":"emails","sweep":1,"marked":2/)
    expect(stdout).toContain('"sweeps": 1')
  }, 120_000)
})
