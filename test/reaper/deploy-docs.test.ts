/**
 * What docs/ promises about the deployment, checked on the packaged templates of a stage without and one with
 * a VPC: the deployer policy (docs/deployer-policy.json) covers every AWS call osls makes to deploy and remove,
 * and every action CloudFormation asks for each resource; checkov's rules hold or are justified
 * (docs/deploy.md); and every alarm has its section of docs/runbook.md, whose queries run on the reaper's
 * own log lines and Lambda's.
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import policyJson from '../../docs/deployer-policy.json' with { type: 'json' }
import { createHandler } from '../../functions/sweep.js'
import { ACCOUNT, REGION, templateCalls } from '../helpers/cfn-actions.js'
import { evaluate, RULES } from '../helpers/checkov-rules.js'
import { useQueues } from '../helpers/fixture.js'
import { allows, OSLS_CALL_GRANTS, oslsCalls, type Policy, type Target } from '../helpers/iam-policy.js'
import { type LogLine, useCapturedLogs } from '../helpers/log-lines.js'
import { logsInsights, metricFilterMatches } from '../helpers/logs-insights.js'
import { type Packaged, packageWith, root } from '../helpers/packaging.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const policy = policyJson as Policy
const read = (file: string) => readFileSync(path.join(root, file), 'utf8')

const VARIANTS: Record<string, string[]> = {
  ci: [],
  civpc: [
    '--param',
    'subnetIds=subnet-0123456789abcdef0',
    '--param',
    'securityGroupIds=sg-0123456789abcdef0',
    '--param',
    'reservedConcurrency=2',
    '--param',
    'alarmEmail=ops@example.com',
    '--param',
    'deploymentBucketLogBucket=acme-access-logs',
    '--param',
    'oldestWaitAlarmMs=off',
  ],
}
const packaged: Record<string, Packaged> = {}
beforeAll(async () => {
  for (const [stage, args] of Object.entries(VARIANTS)) packaged[stage] = await packageWith(['--stage', stage, ...args])
}, 600_000)

const stackOf = (stage: string) => `echomq-reaper-${stage}`
const bucketOf = (stage: string) => `${stackOf(stage)}-serverlessdeploymentbucket-1a2b3c4d5e6f`
function targetArn(target: Target, stage: string): string {
  const stack = stackOf(stage)
  return {
    stack: `arn:aws:cloudformation:${REGION}:${ACCOUNT}:stack/${stack}/0b1c2d3e-4f50-11ee-8394-a5b6c7d8e9f0`,
    changeSet: `arn:aws:cloudformation:${REGION}:${ACCOUNT}:changeSet/${stack}-change-set/0b1c2d3e-4f50-11ee-8394-a5b6c7d8e9f0`,
    bucket: `arn:aws:s3:::${bucketOf(stage)}`,
    object: `arn:aws:s3:::${bucketOf(stage)}/serverless/echomq-reaper/${stage}/1796173664974-2026-12-02T01:07:44.974Z/echomq-reaper.zip`,
    function: `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${stack}-sweep`,
    '*': '*',
  }[target]
}

describe('the deployer policy, docs/deployer-policy.json', () => {
  it('covers every AWS call osls makes to deploy and remove, and knows why it leaves out the others', () => {
    const calls = oslsCalls(path.join(root, 'node_modules/osls'))
    // A call osls gained or lost since the policy was written: look at it, then list it.
    expect([...calls].sort()).toEqual(Object.keys(OSLS_CALL_GRANTS).sort())
    const missing = Object.entries(OSLS_CALL_GRANTS).flatMap(([call, grant]) =>
      'needs' in grant
        ? grant.needs
            .filter(([action, target]) => !allows(policy, action, targetArn(target, 'ci')))
            .map(([a, t]) => `${call}: ${a} on ${t}`)
        : [],
    )
    expect(missing).toEqual([])
    // Deploying with change sets: what cloudformation:*Stack* never matched.
    for (const action of ['CreateChangeSet', 'ExecuteChangeSet', 'DescribeChangeSet', 'DeleteChangeSet'])
      expect(allows(policy, `cloudformation:${action}`, targetArn('changeSet', 'prod'))).toBe(true)
  })

  it.each(Object.keys(VARIANTS))('covers what CloudFormation asks for every resource of the packaged template (stage %s)', (stage) => {
    const p = packaged[stage] as Packaged
    const calls = templateCalls(stackOf(stage), p.resources)
    expect(new Set(calls.map((c) => c.id))).toEqual(new Set(Object.keys(p.resources)))
    expect(calls.filter((c) => !allows(policy, c.action, c.arn)).map((c) => `${c.id}: ${c.action} on ${c.arn}`)).toEqual([])
  })

  it('reaches nothing outside echomq-reaper-* but reads, and passes the role to Lambda only', () => {
    for (const s of policy.Statement) {
      expect(s.Effect, s.Sid).toBe('Allow')
      for (const action of [s.Action].flat()) expect(action, s.Sid).not.toContain('*')
      if ([s.Resource].flat().includes('*'))
        for (const action of [s.Action].flat()) expect(action, s.Sid).toMatch(/^[\w-]+:(Describe|List|Get|Validate)\w+$/)
      else
        for (const arn of [s.Resource].flat())
          expect(arn, s.Sid).toMatch(/^arn:aws:[\w-]+:[^:]*:[^:]*:([\w-]+[/:])?(\/aws\/lambda\/)?echomq-reaper-\*/)
    }
    const pass = policy.Statement.filter((s) => [s.Action].flat().includes('iam:PassRole'))
    expect(pass.map((s) => s.Condition)).toEqual([{ StringEquals: { 'iam:PassedToService': 'lambda.amazonaws.com' } }])
    const attach = policy.Statement.filter((s) => [s.Action].flat().includes('iam:AttachRolePolicy'))
    expect(attach.map((s) => s.Condition)).toEqual([
      { ArnEquals: { 'iam:PolicyARN': 'arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole' } },
    ])
    // A managed policy holds at most 6,144 characters, whitespace aside.
    expect(JSON.stringify(policy).length).toBeLessThan(6_144)
  })

  it('is what the docs point at; the reaper guide lists no permissions of its own', () => {
    expect(read('docs/deploy.md')).toContain('[`deployer-policy.json`](deployer-policy.json)')
    expect(read('docs/reaper.md')).toContain('docs/deployer-policy.json')
    for (const doc of ['README.md', 'docs/reaper.md']) expect(read(doc)).not.toContain('cloudformation:*Stack*')
  })
})

/** docs/deploy.md's checkov table: each rule id (`CKV_AWS_53, 54` is two) with its resource type and verdict. */
function checkovTable(): Map<string, { type: string; here: string }> {
  const rows = new Map<string, { type: string; here: string }>()
  for (const line of read('docs/deploy.md').split('\n')) {
    const cells = line.split('|').map((c) => c.trim())
    const ids = cells[1]
    if (!ids?.startsWith('CKV')) continue
    const [first, ...more] = ids.split(',').map((id) => id.trim())
    const prefix = (first as string).replace(/\d+$/, '')
    for (const id of [first as string, ...more.map((n) => `${prefix}${n}`)])
      rows.set(id, { type: (cells[2] ?? '').replace(/`/g, ''), here: cells[4] ?? '' })
  }
  return rows
}

describe("checkov's rules for the stack's resource types (docs/deploy.md)", () => {
  it('every rule is in the table under its resource type, and every row is a rule', () => {
    const table = checkovTable()
    expect([...table.keys()].sort()).toEqual(RULES.map((r) => r.id).sort())
    for (const rule of RULES) expect(table.get(rule.id)?.type, rule.id).toBe(rule.type)
  })

  it.each(Object.keys(VARIANTS))('a rule the template fails is justified in the table, one it passes is fixed (stage %s)', (stage) => {
    const table = checkovTable()
    for (const [id, failing] of evaluate((packaged[stage] as Packaged).resources)) {
      const here = table.get(id)?.here ?? ''
      if (failing.length > 0) expect(here, `${id} fails on ${failing.join(', ')}`).toMatch(/justified: /)
      else expect(here, id).toMatch(/^fixed/)
    }
  })

  it('the deployment bucket passes CKV_AWS_21, 53, 54, 55 and 56 everywhere, and CKV_AWS_18 with a log bucket', () => {
    const ci = evaluate((packaged.ci as Packaged).resources)
    const vpc = evaluate((packaged.civpc as Packaged).resources)
    for (const id of ['CKV_AWS_19', 'CKV_AWS_21', 'CKV_AWS_53', 'CKV_AWS_54', 'CKV_AWS_55', 'CKV_AWS_56']) {
      expect(ci.get(id), id).toEqual([])
      expect(vpc.get(id), id).toEqual([])
    }
    expect(ci.get('CKV_AWS_18')).toEqual(['ServerlessDeploymentBucket'])
    expect(vpc.get('CKV_AWS_18')).toEqual([])
    expect(ci.get('CKV_AWS_363')).toEqual([])
  })

  it('.ci/run runs checkov where it can be installed, skipping the rules the table justifies, and says so where it cannot', () => {
    const ci = read('.ci/run')
    expect(ci).toMatch(/pip install[^\n]*checkov/)
    expect(ci).toMatch(/--file \.serverless\/cloudformation-template-update-stack\.json/)
    expect(ci).toMatch(/checkov is not installed/)
    const skipped = /^CHECKOV_JUSTIFIED=(\S+)$/m.exec(ci)?.[1]?.split(',') ?? []
    const justified = [...checkovTable()].filter(([, row]) => /justified: /.test(row.here)).map(([id]) => id)
    expect(skipped.sort()).toEqual(justified.sort())
  })
})

type Alarm = { AlarmName: string; AlarmDescription: string }
const alarmsOf = (p: Packaged) =>
  Object.values(p.resources)
    .filter((r) => r.Type === 'AWS::CloudWatch::Alarm')
    .map((r) => r.Properties as unknown as Alarm)

/** docs/runbook.md: each `## name` section's text. */
function runbook(): Map<string, string> {
  const sections = new Map<string, string>()
  for (const part of read('docs/runbook.md').split(/^## /m).slice(1)) {
    const [heading = '', ...body] = part.split('\n')
    sections.set(heading.trim(), body.join('\n'))
  }
  return sections
}
const GENERAL = 'A broken reaper, or broken workers?'
const queriesOf = (text: string) => [...text.matchAll(/```logs-insights\n([\s\S]*?)```/g)].map((m) => (m[1] as string).trim())

describe('the runbook, docs/runbook.md', () => {
  it('has a section for every alarm of the packaged templates, and none for an alarm they do not have', () => {
    const names = new Set(
      Object.entries(packaged).flatMap(([stage, p]) => alarmsOf(p).map((a) => a.AlarmName.replace(`${stackOf(stage)}-`, ''))),
    )
    expect([...runbook().keys()].filter((s) => s !== GENERAL).sort()).toEqual([...names].sort())
    for (const [stage, p] of Object.entries(packaged))
      for (const a of alarmsOf(p))
        expect(a.AlarmDescription).toMatch(new RegExp(`Runbook: docs/runbook\\.md#${a.AlarmName.replace(`${stackOf(stage)}-`, '')}$`))
  })

  it('says for each alarm what it means, the query and the echomq command to start with, and whose fault it is', () => {
    for (const [name, text] of runbook()) {
      if (name === GENERAL) continue
      expect(text, name).toContain('**What it means.**')
      expect(text, name).toContain('**First three things to look at.**')
      expect(queriesOf(text).length, name).toBeGreaterThan(0)
      expect(text, name).toMatch(/```sh\n[^`]*\bnpx echomq \w+/)
      expect(text, name).toContain('**Broken reaper or broken workers?**')
    }
  })
})

describe("the runbook's queries and the timeout filter, on the reaper's own lines and Lambda's", () => {
  const redis = useRedis()
  const { open, worker } = useQueues(redis)
  const logs = useCapturedLogs()

  /** Lambda's own lines under the JSON log format (platform.report), and a timeout as the Text format once wrote it. */
  const lambdaLines: Record<string, unknown>[] = [
    {
      time: '2026-12-02T01:00:55.100Z',
      type: 'platform.report',
      record: { requestId: 'req-ok', metrics: { durationMs: 812.5, billedDurationMs: 813 }, status: 'success' },
    },
    {
      time: '2026-12-02T01:01:55.100Z',
      type: 'platform.report',
      record: {
        requestId: 'req-slow',
        metrics: { durationMs: 55000, billedDurationMs: 55000 },
        status: 'timeout',
        errorType: 'Sandbox.Timedout',
      },
    },
    { '@message': '2026-12-02T01:02:55.100Z req-text Task timed out after 55.05 seconds' },
  ]

  it('find the failed invocation, the timeouts, the failed jobs and the backlog', async () => {
    // EMF: the reaper claims and publishes the failed job (with metrics off it leaves the count for one that publishes).
    const env = { REDIS_URL: redis.url, METRICS_MODE: 'emf', SWEEP_GRACE_MS: '0', IS_LOCAL: 'true' }
    const queue = open('emails')
    await queue.add('bad', {}, { attempts: 1 })
    const boom = worker('emails', () => Promise.reject(new Error('boom')))
    await waitFor(async () => (await queue.counts()).failed === 1, { what: 'the failed job' })
    await boom.close()
    await queue.add('waiting', {})
    await queue.close()
    await crashedJobs(redis.client, 'sms', 1)
    const handler = createHandler(env)
    await handler({}, { getRemainingTimeInMillis: () => 50_000 })
    await handler.close()
    const failing = createHandler({ ...env, REDIS_URL: 'redis://127.0.0.1:99999' })
    await failing({}, { getRemainingTimeInMillis: () => 50_000 }).catch(() => undefined)
    await failing.close()

    const lines = [...(logs.lines as LogLine[]), ...lambdaLines]
    const sections = runbook()
    const run = (name: string, i = 0) => logsInsights(queriesOf(sections.get(name) ?? '')[i] ?? '', lines)
    // Every query of the runbook is one this reading of Logs Insights accepts.
    for (const [name, text] of sections) for (const q of queriesOf(text)) expect(() => logsInsights(q, lines), name).not.toThrow()

    expect(run('function-errors')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ errorCode: 'ERR_CONFIG', count: 1 }),
        expect.objectContaining({ 'record.status': 'timeout', count: 1 }),
        // The Text format's line (no JSON fields): grouped under none, as Logs Insights shows it.
        { errorCode: null, hint: null, 'record.status': null, count: 1 },
      ]),
    )
    expect(run('function-timeouts')).toEqual([
      expect.objectContaining({ 'record.requestId': 'req-slow', 'record.metrics.durationMs': 55000 }),
    ])
    expect(run('jobs-failed')).toEqual([{ queue: 'emails', failed: 1 }])
    expect(run('oldest-wait')).toEqual([expect.objectContaining({ oldestWaitQueue: 'emails', waiting: 1 })])
    expect(run('sweeper-not-invoked').length).toBeGreaterThan(0)

    const pattern = (packaged.ci as Packaged).resources.FunctionTimeoutsFilter?.Properties.FilterPattern as string
    expect(lambdaLines.slice(0, 2).map((l) => metricFilterMatches(pattern, l))).toEqual([false, true])
    expect(logs.lines.some((l) => metricFilterMatches(pattern, l))).toBe(false)
  })
})
