/**
 * `npm run package` offline, as on a fresh clone: no AWS variable, an empty HOME (no ~/.aws), for two
 * stages, and the CloudFormation templates it writes; then the parameters that change the template, and
 * `serverless invoke local` against a test Redis. Packaging runs take turns with other files' (a lock in
 * helpers/packaging.ts). The deployer policy, checkov's rules and the runbook: deploy-docs.test.ts.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { METRIC_NAMES } from '../../lib/reaper/metrics.js'
import { SCRIPT_FILES } from '../../lib/redis/commands.js'
import { type CloudWatchEndpoint, startCloudWatchEndpoint } from '../helpers/cloudwatch-endpoint.js'
import {
  type BadParameter,
  cfnLint,
  LEAKED_PASSWORD,
  offlineEnv,
  type Packaged,
  packageWith,
  packagingErrors,
  root,
} from '../helpers/packaging.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { startRedis, type TestRedis } from '../helpers/redis-server.js'
import { type SsmEndpoint, startSsmEndpoint } from '../helpers/ssm-endpoint.js'

const run = promisify(execFile)

/** A bad parameter (`name=value`, each a --param) that `resolver` (serverless/<resolver>) must refuse with `message`. */
const bad = (params: string[], resolver: string, message: RegExp): BadParameter => ({
  args: params.flatMap((p) => ['--param', p]),
  resolver,
  message,
})

const ofType = (p: Packaged, type: string) => Object.entries(p.resources).filter(([, r]) => r.Type === type)
const fn = (p: Packaged) => p.resources.SweepLambdaFunction?.Properties ?? {}
const fnEnv = (p: Packaged) => (fn(p).Environment as { Variables: Record<string, string> }).Variables
const alarms = (p: Packaged) => Object.fromEntries(ofType(p, 'AWS::CloudWatch::Alarm').map(([id, r]) => [id, r.Properties]))
type Statement = { Action: string[] | string; Resource: unknown; Condition?: unknown }
const statements = (p: Packaged) =>
  (
    (p.resources.IamRoleLambdaExecution?.Properties ?? { Policies: [] }) as { Policies: { PolicyDocument: { Statement: Statement[] } }[] }
  ).Policies.flatMap((policy) => policy.PolicyDocument.Statement)
const statementFor = (p: Packaged, action: string) => statements(p).find((s) => [s.Action].flat().includes(action))
const parameterArn = (stage: string) => ({
  'Fn::Sub': `arn:\${AWS::Partition}:ssm:\${AWS::Region}:\${AWS::AccountId}:parameter/echomq/${stage}/redis-url`,
})

const stages: Record<string, Packaged> = {}

const BAD_PARAMETERS: BadParameter[] = [
  bad(['subnetIds=subnet-1'], 'vpc.cjs', /subnetIds is set but securityGroupIds is not/),
  bad(['securityGroupIds=sg-1'], 'vpc.cjs', /securityGroupIds is set but subnetIds is not/),
  bad(['reservedConcurrency=lots'], 'reserved-concurrency.cjs', /reservedConcurrency: expected a whole number/),
  bad(['metricsMode=loud'], 'metrics-mode.cjs', /metricsMode: expected one of api, emf, off/),
  // Checked by the code that reads them at run time (lib/reaper/config.ts), not by a copy of its rules.
  bad(
    ['sweepsPerInvocation=99'],
    'settings.cjs',
    /--param sweepsPerInvocation: the function's SWEEPS_PER_INVOCATION: expected an integer from 1 to 60/,
  ),
  bad(['sweepGraceMs=-5'], 'settings.cjs', /--param sweepGraceMs: the function's SWEEP_GRACE_MS: expected an integer from 0/),
  bad(['queues=a,bad name'], 'settings.cjs', /--param queues: the function's QUEUES: expected/),
  bad(['queues=,'], 'settings.cjs', /--param queues: the function's QUEUES: expected a comma-separated list/),
  // A misspelt name would be ignored, leaving the default in place.
  bad(['sweepGraceMS=1000'], 'settings.cjs', /unknown parameter "sweepGraceMS" \(did you mean "sweepGraceMs"\?\)/),
  bad(['failedJobsThreshold=-1'], 'settings.cjs', /failedJobsThreshold: expected a whole number of jobs/),
  bad(['oldestWaitAlarmMs=abc'], 'settings.cjs', /oldestWaitAlarmMs: expected a whole number of ms \(1 or more\), or off/),
  bad(['deploymentBucketLogBucket=arn:aws:s3:::logs'], 'deployment-bucket.cjs', /deploymentBucketLogBucket: expected an S3 bucket name/),
  bad(['alarmEmail=nope'], 'settings.cjs', /alarmEmail: expected an e-mail address/),
  // Checked by lib/reaper/worker-functions.ts, which reads WORKER_FUNCTIONS at run time.
  bad(['workerQueue=bad name'], 'worker-functions.cjs', /workerQueue: .*expected a queue name/),
  bad(['workerQueue=emails', 'workerMaxConcurrency=0'], 'worker-functions.cjs', /emails\.maxConcurrency: expected an integer from 1/),
  // The AWS-managed key's policy cannot let CloudWatch use it: every alarm's notification would fail.
  bad(['alarmTopicKmsKeyArn=alias/aws/sns'], 'alarm-topic.cjs', /alarmTopicKmsKeyArn: expected the ARN of a customer-managed KMS key/),
  bad(['alarmTopicArn=ops'], 'alarm-topic.cjs', /alarmTopicArn: expected an SNS topic ARN/),
]
/**
 * The bad parameters' packaging runs, started with the file: they fail while resolving variables, before
 * any build, so they run beside the packaging runs (which take turns on .serverless/) instead of after them.
 */
let refusals: ReturnType<typeof packagingErrors>
beforeAll(() => {
  refusals = packagingErrors(BAD_PARAMETERS)
  // Awaited by its test; a failure is reported there, not as an unhandled rejection meanwhile.
  refusals.catch(() => undefined)
})

const METRIC_ALARMS = ['JobsFailedAlarm', 'MetricsNotPublishedAlarm', 'NoQueuesSweptAlarm', 'OldestWaitAlarm', 'SweepErrorsAlarm']
/** On the function's own metrics and log lines: there whatever metricsMode is. */
const FUNCTION_ALARMS = [
  'FunctionErrorsAlarm',
  'FunctionTimeoutsAlarm',
  'SweeperNotInvokedAlarm',
  'WorkerErrorsAlarm',
  'WorkerThrottlesAlarm',
]

describe.each(['dev', 'prod'])('npm run package --stage %s, offline: no AWS credentials, no ~/.aws', (stage) => {
  let p: Packaged
  beforeAll(async () => {
    stages[stage] ??= await packageWith(['--stage', stage])
    p = stages[stage] as Packaged
  }, 600_000)

  it('holds no Redis URL or password anywhere, even with REDIS_URL exported at package time', () => {
    expect(p.texts).not.toMatch(/rediss?:\/\//)
    expect(p.texts).not.toContain(LEAKED_PASSWORD)
    expect(fnEnv(p)).not.toHaveProperty('REDIS_URL')
    expect(fnEnv(p).REDIS_URL_PARAMETER).toBe(`/echomq/${stage}/redis-url`)
  })

  it('a Node 24 arm64 function under the one-minute schedule, no reserved concurrency, no VPC, no versions', () => {
    expect(fn(p)).toMatchObject({ Runtime: 'nodejs24.x', Architectures: ['arm64'], Handler: 'functions/sweep.handler' })
    expect(fn(p).Timeout).toBeLessThan(60)
    expect(fn(p)).not.toHaveProperty('ReservedConcurrentExecutions')
    expect(fn(p)).not.toHaveProperty('VpcConfig')
    expect(ofType(p, 'AWS::Lambda::Version')).toEqual([])
    // Unset, so the code's default applies: api in Lambda, off under invoke local.
    expect(fnEnv(p)).not.toHaveProperty('METRICS_MODE')
  })

  it('runs every minute, with no retries and a maximum event age of 60 s', () => {
    const [[, rule] = []] = ofType(p, 'AWS::Events::Rule')
    expect(rule?.Properties.ScheduleExpression).toBe('rate(1 minute)')
    const [[, invokeConfig] = []] = ofType(p, 'AWS::Lambda::EventInvokeConfig')
    expect(invokeConfig?.Properties).toMatchObject({ MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60 })
  })

  it(`publishes to namespace EchoMQ/${stage}, the only one its role may write`, () => {
    expect(fnEnv(p).METRICS_NAMESPACE).toBe(`${METRIC_NAMES.namespaceDefault}/${stage}`)
    expect(statementFor(p, 'cloudwatch:PutMetricData')?.Condition).toEqual({ StringEquals: { 'cloudwatch:namespace': `EchoMQ/${stage}` } })
    for (const alarm of Object.values(alarms(p))) {
      const metrics = (alarm.Metrics as { MetricStat?: { Metric: { Namespace: string } } }[] | undefined) ?? [
        { MetricStat: { Metric: alarm as never } },
      ]
      for (const m of metrics)
        if (m.MetricStat && m.MetricStat.Metric.Namespace !== 'AWS/Lambda') expect(m.MetricStat.Metric.Namespace).toBe(`EchoMQ/${stage}`)
    }
  })

  it('cfn-lint finds no error and no warning in the template', async () => {
    expect(await cfnLint(p.template)).toEqual({ code: 0, output: '' })
    expect(p.conditions).toEqual({})
  })

  it(`writes its logs to its own log groups only (the reaper's, the worker function's), by exact name (a stage "${stage}vpc" would not match)`, () => {
    const logs = statements(p).filter((s) => [s.Action].flat().some((a) => a.startsWith('logs:')))
    const group = (fn: string) => ({
      'Fn::Sub': `arn:\${AWS::Partition}:logs:\${AWS::Region}:\${AWS::AccountId}:log-group:/aws/lambda/echomq-reaper-${stage}-${fn}:*`,
    })
    expect(logs).toEqual([
      { Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: [group('sweep'), group('work')] },
    ])
    expect(p.resources.SweepLogGroup?.Properties).toEqual({ LogGroupName: `/aws/lambda/echomq-reaper-${stage}-sweep`, RetentionInDays: 14 })
  })

  it("logs as Powertools does, under Lambda's JSON log format, with the stage as the service", () => {
    expect(fn(p).LoggingConfig).toEqual({ LogFormat: 'JSON', ApplicationLogLevel: 'INFO', SystemLogLevel: 'INFO' })
    expect(fnEnv(p).POWERTOOLS_SERVICE_NAME).toBe(`echomq-reaper-${stage}`)
  })

  it('may read its one SSM parameter and decrypt it through SSM only, and nothing else beyond metrics and its logs', () => {
    const actions = statements(p).flatMap((s) => [s.Action].flat())
    expect(actions.filter((a) => !a.startsWith('logs:')).sort()).toEqual(['cloudwatch:PutMetricData', 'kms:Decrypt', 'ssm:GetParameter'])
    expect(statementFor(p, 'ssm:GetParameter')?.Resource).toEqual(parameterArn(stage))
    expect(statementFor(p, 'kms:Decrypt')).toMatchObject({
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub string, not a template literal
      Resource: { 'Fn::Sub': 'arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/*' },
      Condition: {
        StringEquals: {
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub string, not a template literal
          'kms:ViaService': { 'Fn::Sub': 'ssm.${AWS::Region}.amazonaws.com' },
          'kms:EncryptionContext:PARAMETER_ARN': parameterArn(stage),
        },
      },
    })
    expect((p.resources.IamRoleLambdaExecution?.Properties.ManagedPolicyArns as unknown[] | undefined) ?? []).toEqual([])
  })

  it('every alarm notifies on ALARM and OK, says what missing data means, and a failover of 1-2 minutes cannot trip it', () => {
    const all = alarms(p)
    expect(Object.keys(all).sort()).toEqual([...FUNCTION_ALARMS, ...METRIC_ALARMS].sort())
    const topic = { Ref: 'AlarmTopic' }
    for (const [id, alarm] of Object.entries(all)) {
      expect(alarm.AlarmName, id).toMatch(new RegExp(`^echomq-reaper-${stage}-`))
      // What it means, what to check first, the query to run, and its section of the runbook.
      expect(alarm.AlarmDescription, id).toMatch(/First check: .+\. Logs Insights: (filter|fields) .+ Runbook: docs\/runbook\.md#[a-z-]+$/)
      expect(String(alarm.AlarmDescription).length, id).toBeLessThanOrEqual(1024)
      expect(alarm.AlarmActions, id).toEqual([topic])
      expect(alarm.OKActions, id).toEqual([topic])
      expect(['breaching', 'notBreaching'], id).toContain(alarm.TreatMissingData)
      if (id === 'JobsFailedAlarm') continue
      // One bad datapoint a minute for two minutes (a failover) stays under DatapointsToAlarm.
      expect(alarm, id).toMatchObject({ EvaluationPeriods: 5, DatapointsToAlarm: 3 })
      const periods = alarm.Metrics
        ? (alarm.Metrics as { MetricStat?: { Period: number } }[]).flatMap((m) => m.MetricStat?.Period ?? [])
        : [alarm.Period]
      expect(periods, id).toEqual(periods.map(() => 60))
    }
  })

  it('JobsFailed alarms on more than failedJobsThreshold jobs entering failed in 5 minutes; no alarm on the failed backlog', () => {
    expect(alarms(p).JobsFailedAlarm).toMatchObject({
      MetricName: METRIC_NAMES.JobsFailed,
      Statistic: 'Sum',
      Period: 300,
      EvaluationPeriods: 1,
      DatapointsToAlarm: 1,
      Threshold: '0',
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    })
    expect(alarms(p).JobsFailedAlarm).not.toHaveProperty('Dimensions')
    expect(Object.values(alarms(p)).map((a) => a.MetricName)).not.toContain(METRIC_NAMES.FailedCount)
  })

  it('one cause pages once: only the dead-man on AWS/Lambda Invocations treats missing data as breaching', () => {
    const breaching = Object.entries(alarms(p)).filter(([, a]) => a.TreatMissingData === 'breaching')
    expect(breaching.map(([id]) => id)).toEqual(['SweeperNotInvokedAlarm'])
    expect(alarms(p).SweeperNotInvokedAlarm).toMatchObject({
      Namespace: 'AWS/Lambda',
      MetricName: 'Invocations',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: 'SweepLambdaFunction' } }],
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
    })
    // Sweeps whose metrics did not reach CloudWatch: counted from the summary line by CloudWatch Logs itself.
    expect(p.resources.MetricsUnpublishedFilter?.Properties).toEqual({
      LogGroupName: { Ref: 'SweepLogGroup' },
      FilterPattern: '{ ($.message = "summary") && ($.metricsPublished IS FALSE) }',
      MetricTransformations: [{ MetricNamespace: `EchoMQ/${stage}`, MetricName: METRIC_NAMES.MetricsUnpublished, MetricValue: '1' }],
    })
    expect(alarms(p).MetricsNotPublishedAlarm).toMatchObject({
      MetricName: METRIC_NAMES.MetricsUnpublished,
      TreatMissingData: 'notBreaching',
    })
  })

  it('sweep errors, zero queues swept, a silent sweeper, and a backlog: the oldest-wait alarm is on by default', () => {
    const all = alarms(p)
    expect(all.SweepErrorsAlarm).toMatchObject({
      MetricName: METRIC_NAMES.SweepErrors,
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    })
    expect(all.NoQueuesSweptAlarm).toMatchObject({
      MetricName: METRIC_NAMES.QueuesSwept,
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
    })
    // Workers that are all gone fail and stall nothing: only the age of the oldest waiting job says so.
    expect(all.OldestWaitAlarm).toMatchObject({
      MetricName: METRIC_NAMES.OldestWaitAge,
      Statistic: 'Maximum',
      Threshold: METRIC_NAMES.oldestWaitAlarmMsDefault,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    })
    expect(all.OldestWaitAlarm).not.toHaveProperty('Dimensions')
  })

  it("an invocation stopped at its timeout pages function-timeouts, from Lambda's report line; function-errors takes it out", () => {
    expect(p.resources.FunctionTimeoutsFilter?.Properties).toEqual({
      LogGroupName: { Ref: 'SweepLogGroup' },
      FilterPattern: '{ ($.type = "platform.report") && ($.record.status = "timeout") }',
      // 0 for every other line: the series exists whenever the function logs, for function-errors' expression.
      MetricTransformations: [
        { MetricNamespace: `EchoMQ/${stage}`, MetricName: METRIC_NAMES.FunctionTimeouts, MetricValue: '1', DefaultValue: 0 },
      ],
    })
    expect(alarms(p).FunctionTimeoutsAlarm).toMatchObject({
      Namespace: `EchoMQ/${stage}`,
      MetricName: METRIC_NAMES.FunctionTimeouts,
      Statistic: 'Sum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    })
    // Lambda's Errors counts timeouts too: one cause, one page.
    const errors = alarms(p).FunctionErrorsAlarm as {
      Metrics: { Id: string; Expression?: string; ReturnData: boolean; MetricStat?: unknown }[]
    }
    expect(errors.Metrics.find((m) => m.ReturnData)?.Expression).toBe('errors - FILL(timeouts, 0)')
    expect(errors.Metrics.find((m) => m.Id === 'errors')?.MetricStat).toMatchObject({
      Metric: {
        Namespace: 'AWS/Lambda',
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: 'SweepLambdaFunction' } }],
      },
      Stat: 'Sum',
    })
    expect(errors.Metrics.find((m) => m.Id === 'timeouts')?.MetricStat).toMatchObject({
      Metric: { Namespace: `EchoMQ/${stage}`, MetricName: METRIC_NAMES.FunctionTimeouts },
      Stat: 'Sum',
    })
    expect(alarms(p).FunctionErrorsAlarm?.AlarmDescription).toMatch(/record\.status != 'success'.*Task timed out/)
  })

  it('the deployment bucket: no public access, versioned (old versions expire), encrypted, TLS only; no access logs unless asked', () => {
    const bucket = p.resources.ServerlessDeploymentBucket?.Properties ?? {}
    expect(bucket.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    })
    expect(bucket.VersioningConfiguration).toEqual({ Status: 'Enabled' })
    expect(bucket.BucketEncryption).toEqual({
      ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
    })
    expect(bucket.LifecycleConfiguration).toMatchObject({
      Rules: [{ Status: 'Enabled', NoncurrentVersionExpiration: { NoncurrentDays: 30 } }],
    })
    expect(bucket).not.toHaveProperty('LoggingConfiguration')
    const policy = p.resources.ServerlessDeploymentBucketPolicy?.Properties.PolicyDocument as { Statement: unknown[] }
    expect(policy.Statement).toEqual([
      expect.objectContaining({ Effect: 'Deny', Principal: '*', Action: 's3:*', Condition: { Bool: { 'aws:SecureTransport': false } } }),
    ])
  })

  it('a topic of its own (named for the stage), an e-mail subscription only when an address is given, a dashboard', () => {
    expect(p.resources.AlarmTopic).toEqual({ Type: 'AWS::SNS::Topic', Properties: { TopicName: `echomq-reaper-${stage}-alarms` } })
    expect(p.resources).not.toHaveProperty('AlarmEmailSubscription')
    expect(p.resources.Dashboard?.Properties.DashboardName).toBe(`echomq-reaper-${stage}`)
    const body = JSON.stringify(p.resources.Dashboard?.Properties.DashboardBody)
    // SweepRuns is published but not drawn: the function's own Invocations shows the runs.
    const {
      namespaceDefault: _ns,
      perQueueDefault: _pq,
      dimension: _d,
      oldestWaitAlarmMsDefault: _o,
      SweepRuns: _r,
      ...names
    } = METRIC_NAMES
    for (const name of Object.values(names)) expect(body).toContain(name)
    expect(body).toContain("filter message = 'queue'")
    expect(Object.keys(p.outputs)).toEqual(expect.arrayContaining(['AlarmTopicArn', 'DashboardName']))
  })

  it('the package holds the minified bundle (Powertools Logger and Parameters in it) with the Lua scripts inside, under 360 KB zipped', async () => {
    const { stdout } = await run('unzip', ['-l', p.zip])
    expect(stdout).toContain('functions/sweep.cjs')
    // The scripts are text in the bundle (scripts/embed-lua.cjs), so the zip holds no lua/ directory.
    expect(stdout).not.toContain('lua/')
    const { stdout: bundle } = await run('unzip', ['-p', p.zip, 'functions/sweep.cjs'], { maxBuffer: 16 * 1024 * 1024 })
    const line = readFileSync(`${root}lua/${SCRIPT_FILES.sweepStep}`, 'utf8')
      .split('\n')
      .find((l: string) => /^[\w ,.()-]{40,}$/.test(l.trim()))
    expect({ line, inBundle: line !== undefined && bundle.includes(line.trim()) }).toMatchObject({ inBundle: true })
    // 300 KB until flows (lib/flows/, their scripts) came into the bundle: 303 KB with them, 311 KB with flow
    // removal, retried children and the job changes (every script is embedded, the reaper's or not); 329 KB
    // with the batched paths of the cost work (settleChild by parent, one read and write a failed run); 341 KB
    // with ioredis 6.1 (what an install gets; its command table is larger); 350 KB with deduplication's
    // reschedule and keepLastIfActive (lua/includes/nextJob.lua, and what add-7 and finish-16 gained).
    expect(statSync(p.zip).size).toBeLessThan(360_000)
  })

  it('the worker function: its own zip, started by no one unless workerQueue names a queue (no WORKER_FUNCTIONS, no invoke grant)', async () => {
    const { stdout } = await run('unzip', ['-l', path.join(path.dirname(p.zip), 'work.zip')])
    expect(stdout).toContain('functions/work.cjs')
    expect(p.resources.WorkLambdaFunction?.Properties).toMatchObject({ FunctionName: `echomq-reaper-${stage}-work`, Timeout: 300 })
    expect(fnEnv(p).WORKER_FUNCTIONS).toBeUndefined()
    expect(statementFor(p, 'lambda:InvokeFunction')).toBeUndefined()
  })
})

describe('parameters that change the template', () => {
  let p: Packaged
  beforeAll(async () => {
    p = await packageWith([
      '--stage',
      'qa',
      '--param',
      'subnetIds=subnet-0123456789abcdef0,subnet-0123456789abcdef1',
      '--param',
      'securityGroupIds=sg-0123456789abcdef0',
      '--param',
      'reservedConcurrency=2',
      '--param',
      'alarmTopicArn=arn:aws:sns:eu-west-1:123456789012:ops',
      '--param',
      'oldestWaitAlarmMs=600000',
      '--param',
      'kmsKeyArn=arn:aws:kms:eu-west-1:123456789012:key/1234abcd',
      '--param',
      'deploymentBucketLogBucket=acme-access-logs',
      '--param',
      'redisUrl=redis://dev-user:dev-pw@dev-redis:6379',
      '--param',
      'alarmEmail=ops@example.com',
      '--param',
      'workerQueue=emails',
      '--param',
      'workerMaxConcurrency=4',
    ])
  }, 600_000)

  it('workerQueue: WORKER_FUNCTIONS names the worker function, and the role may invoke that function only', () => {
    expect(JSON.parse(fnEnv(p).WORKER_FUNCTIONS ?? '{}')).toEqual({
      emails: { function: 'echomq-reaper-qa-work', maxConcurrency: 4, jobsPerInvocation: 100 },
    })
    expect(statementFor(p, 'lambda:InvokeFunction')).toEqual({
      Effect: 'Allow',
      Action: 'lambda:InvokeFunction',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub string, not a template literal
      Resource: [{ 'Fn::Sub': 'arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:echomq-reaper-qa-work' }],
    })
    expect(p.resources.WorkLambdaFunction?.Properties.Environment).toMatchObject({ Variables: { WORKER_QUEUE: 'emails' } })
  })

  it('cfn-lint finds no error and no warning in the template of a stage in a VPC', async () => {
    expect(await cfnLint(p.template)).toEqual({ code: 0, output: '' })
  })

  it('subnetIds and securityGroupIds: the function joins the VPC, metrics default to EMF, and its role may not PutMetricData', () => {
    expect(fn(p).VpcConfig).toEqual({
      SubnetIds: ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1'],
      SecurityGroupIds: ['sg-0123456789abcdef0'],
    })
    expect(fnEnv(p).METRICS_MODE).toBe('emf')
    expect(statementFor(p, 'cloudwatch:PutMetricData')).toBeUndefined()
    expect(statementFor(p, 'ssm:GetParameter')).toBeDefined()
  })

  it('deploymentBucketLogBucket: the deployment bucket logs its access there, under the stack name', () => {
    expect(p.resources.ServerlessDeploymentBucket?.Properties.LoggingConfiguration).toEqual({
      DestinationBucketName: 'acme-access-logs',
      LogFilePrefix: 'echomq-reaper-qa/',
    })
  })

  it('reservedConcurrency, alarmTopicArn (no topic of its own), oldestWaitAlarmMs and kmsKeyArn', () => {
    expect(fn(p).ReservedConcurrentExecutions).toBe(2)
    expect(p.resources).not.toHaveProperty('AlarmTopic')
    expect(alarms(p).SweepErrorsAlarm?.AlarmActions).toEqual(['arn:aws:sns:eu-west-1:123456789012:ops'])
    expect(p.resources.AlarmEmailSubscription?.Properties.TopicArn).toBe('arn:aws:sns:eu-west-1:123456789012:ops')
    expect(alarms(p).OldestWaitAlarm?.Threshold).toBe('600000')
    expect(statementFor(p, 'kms:Decrypt')?.Resource).toBe('arn:aws:kms:eu-west-1:123456789012:key/1234abcd')
  })

  it('a plain redisUrl (development) reaches the environment, with a warning in the output', () => {
    expect(fnEnv(p).REDIS_URL).toBe('redis://dev-user:dev-pw@dev-redis:6379')
    expect(p.output).toMatch(/Warning: the redisUrl parameter puts the Redis URL, password included, into the function environment/)
  })

  it('a VPC half given, or a bad value, stops packaging with a message naming what is wrong', async () => {
    const results = await refusals
    BAD_PARAMETERS.forEach(({ message }, i) => {
      expect(results[i]?.code).not.toBe(0)
      expect(results[i]?.line).toMatch(message)
    })
  }, 300_000)
})

describe('metricsMode=off and an encrypted topic', () => {
  let p: Packaged
  beforeAll(async () => {
    p = await packageWith([
      '--stage',
      'quiet',
      '--param',
      'metricsMode=off',
      '--param',
      'oldestWaitAlarmMs=600000',
      '--param',
      'alarmTopicKmsKeyArn=arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    ])
  }, 600_000)

  it("no alarm on the reaper's metrics (none could ever leave ALARM, or enter it), and packaging says so", async () => {
    expect(Object.keys(alarms(p)).sort()).toEqual(FUNCTION_ALARMS)
    expect(statementFor(p, 'cloudwatch:PutMetricData')).toBeUndefined()
    expect(p.resources).not.toHaveProperty('MetricsUnpublishedFilter')
    expect(p.output).toMatch(/Warning: metricsMode=off: the alarms on the reaper's metrics .* are not created/)
    expect(fnEnv(p).METRICS_MODE).toBe('off')
    expect(await cfnLint(p.template)).toEqual({ code: 0, output: '' })
  })

  it('the topic is encrypted with the customer-managed key given, never alias/aws/sns', () => {
    expect(p.resources.AlarmTopic?.Properties.KmsMasterKeyId).toBe(
      'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    )
  })
})

describe('the packaged function, run as Lambda runs it: its URL from SSM, its metrics to CloudWatch', () => {
  const PASSWORD = 'bundle-s3cret'
  let bundleDir: string
  let redis: TestRedis
  let ssm: SsmEndpoint
  let cw: CloudWatchEndpoint
  let deployed: Record<string, string>
  beforeAll(async () => {
    stages.dev ??= await packageWith(['--stage', 'dev'])
    deployed = fnEnv(stages.dev)
    bundleDir = mkdtempSync(path.join(tmpdir(), 'echomq-task-'))
    await run('unzip', ['-q', stages.dev.zip, '-d', bundleDir])
    redis = await startRedis()
    await redis.client.call('ACL', 'SETUSER', 'reaper', 'on', `>${PASSWORD}`, '~*', '&*', '+@all')
    await redis.client.call('ACL', 'SETUSER', 'noscripts', 'on', `>${PASSWORD}`, '~*', '&*', '+@all', '-@scripting')
    ssm = await startSsmEndpoint()
    cw = await startCloudWatchEndpoint()
  }, 600_000)
  afterAll(async () => {
    await Promise.all([redis?.stop(), ssm?.close(), cw?.close()])
  })

  /** One cold start of the bundle in a fresh Node process, with the template's environment. */
  async function coldStart(user: string, extra: Record<string, string | undefined> = {}) {
    ssm.parameters.set(deployed.REDIS_URL_PARAMETER ?? '', { value: `redis://${user}:${PASSWORD}@127.0.0.1:${redis.port}` })
    cw.requests.length = 0
    const env = Object.fromEntries(
      Object.entries({
        PATH: process.env.PATH,
        ...deployed,
        AWS_LAMBDA_FUNCTION_NAME: 'echomq-reaper-dev-sweep',
        LAMBDA_TASK_ROOT: bundleDir,
        AWS_REGION: 'eu-west-1',
        AWS_ACCESS_KEY_ID: 'AKIATEST',
        AWS_SECRET_ACCESS_KEY: 'test',
        AWS_ENDPOINT_URL_SSM: ssm.url,
        AWS_ENDPOINT_URL_CLOUDWATCH: cw.url,
        ...extra,
      }).filter((e): e is [string, string] => e[1] !== undefined),
    )
    const script = `const { handler } = require(${JSON.stringify(path.join(bundleDir, 'functions/sweep.cjs'))})
handler({ source: 'aws.events' }, { getRemainingTimeInMillis: () => 50000 })
  .then((result) => console.log(JSON.stringify({ result })), (e) => console.log(JSON.stringify({ failure: { code: e.code, message: e.message } })))
  .finally(() => handler.close())`
    const { stdout, stderr } = await run(process.execPath, ['-e', script], { cwd: bundleDir, env, timeout: 30_000 })
    const lines = `${stdout}\n${stderr}`
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    const metric = (name: string) => cw.requests[0]?.body.MetricData.find((d) => d.MetricName === name && !d.Dimensions)?.Value
    return { text: `${stdout}\n${stderr}`, lines, metric, outcome: lines.find((l) => 'result' in l || 'failure' in l) }
  }

  it('sweeps with the URL from SSM and publishes the totals to EchoMQ/dev; the password is in no output', async () => {
    await crashedJobs(redis.client, 'emails', 2)

    const { text, metric, outcome } = await coldStart('reaper')

    expect(outcome).toEqual({ result: { sweeps: 1, queues: { emails: { marked: 2, recovered: 0, failed: 0 } } } })
    expect(ssm.requests.at(-1)?.body).toEqual({ Name: '/echomq/dev/redis-url', WithDecryption: true })
    expect(cw.requests).toHaveLength(1)
    expect(cw.requests[0]?.body.Namespace).toBe('EchoMQ/dev')
    expect(metric(METRIC_NAMES.StalledMarked)).toBe(2)
    expect(metric(METRIC_NAMES.SweepErrors)).toBe(0)
    expect(text).not.toContain(PASSWORD)
  })

  it('a Redis user that may not run scripts: the invocation returns, SweepErrors counts the queue', async () => {
    await crashedJobs(redis.client, 'sms', 1)
    const { metric, outcome } = await coldStart('noscripts', { QUEUES: 'sms' })
    expect(JSON.stringify(outcome)).toMatch(/NOPERM/)
    expect(metric(METRIC_NAMES.SweepErrors)).toBe(1)
  })

  it('a wrong prefix: QueuesSwept = 0 and a line naming the prefix that holds queues', async () => {
    const { metric, lines } = await coldStart('reaper', { PREFIX: 'wrong' })
    expect(metric(METRIC_NAMES.QueuesSwept)).toBe(0)
    expect(lines.find((l) => l.reason === 'other-prefix')).toMatchObject({ otherPrefixes: ['emq'] })
  })

  it('no URL source at all: fails with ERR_CONFIG naming both variables, never localhost', async () => {
    const { outcome } = await coldStart('reaper', { REDIS_URL_PARAMETER: undefined })
    expect(outcome).toMatchObject({ failure: { code: 'ERR_CONFIG', message: expect.stringMatching(/REDIS_URL_PARAMETER.*REDIS_URL/) } })
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

  it('with no -d (an empty event), against REDIS_URL from the shell, metrics off, and the process exits', async () => {
    await crashedJobs(redis.client, 'emails', 2)
    const invocation = run('npx', ['serverless', 'invoke', 'local', '-f', 'sweep', '--param', 'sweepGraceMs=0'], {
      cwd: root,
      env: { ...offlineEnv, REDIS_URL: redis.url },
      timeout: 90_000,
    })
    invocation.child.stdin?.end() // osls reads the event from stdin when -d is absent: none
    const { stdout } = await invocation
    expect(stdout).toMatch(/"message":"queue".*"queue":"emails","sweeps":1,"marked":2/)
    expect(stdout).toMatch(/"message":"summary".*"queuesSwept":1.*"metrics":"off"/)
    expect(stdout).toContain('"sweeps": 1')
  }, 120_000)
})
