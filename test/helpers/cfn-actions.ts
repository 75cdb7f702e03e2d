/**
 * What CloudFormation calls, with the deployer's credentials, to create, read, update and delete each
 * resource type of the reaper's stack, and on which ARN: the permissions of the types' handlers in
 * CloudFormation's resource schemas (the `handlers` section of each type's schema), kept to the properties
 * this stack sets, plus `when` for the grants a property adds (a VPC, reserved concurrency, access logs).
 * A type missing here fails the check, so a resource type new to the stack is looked at before it ships.
 */
import type { Resource } from './packaging.js'

export const ACCOUNT = '123456789012'
export const REGION = 'eu-west-1'

interface Grant {
  actions: string[]
  /** The ARN the actions are asked on; the resource's own ARN when absent. */
  on?: (ctx: Context) => string
  /** Needed only when this holds for the resource's properties. */
  when?: (props: Record<string, unknown>) => boolean
}

interface Context {
  stack: string
  id: string
  resource: Resource
  resources: Record<string, Resource>
}

const ANY = () => '*'
const arn = (service: string, rest: string, region = REGION) => `arn:aws:${service}:${region}:${ACCOUNT}:${rest}`

/** A property's value with Ref and Fn::Join (of strings, AWS::Region and Refs) worked out; a name CloudFormation makes otherwise. */
function value(ctx: Context, v: unknown): string {
  if (typeof v === 'string') return v
  const o = v as Record<string, unknown>
  if (o?.Ref === 'AWS::Region') return REGION
  if (typeof o?.Ref === 'string') return physicalName({ ...ctx, id: o.Ref, resource: ctx.resources[o.Ref] as Resource })
  if (Array.isArray(o?.['Fn::Join'])) {
    const [sep, parts] = o['Fn::Join'] as [string, unknown[]]
    return parts.map((p) => value(ctx, p)).join(sep)
  }
  if (Array.isArray(o?.['Fn::GetAtt'])) {
    const [id] = o['Fn::GetAtt'] as [string]
    return physicalName({ ...ctx, id, resource: ctx.resources[id] as Resource })
  }
  throw new Error(`cfn-actions: cannot work out ${JSON.stringify(v)}`)
}

const NAME_PROPERTY: Record<string, string> = {
  'AWS::S3::Bucket': 'BucketName',
  'AWS::Logs::LogGroup': 'LogGroupName',
  'AWS::IAM::Role': 'RoleName',
  'AWS::Lambda::Function': 'FunctionName',
  'AWS::Events::Rule': 'Name',
  'AWS::SNS::Topic': 'TopicName',
  'AWS::CloudWatch::Alarm': 'AlarmName',
  'AWS::CloudWatch::Dashboard': 'DashboardName',
}

/** The resource's name: its name property, else what CloudFormation generates (`<stack>-<logical id>-<suffix>`). */
function physicalName(ctx: Context): string {
  const named = NAME_PROPERTY[ctx.resource.Type]
  const given = named ? ctx.resource.Properties[named] : undefined
  if (given !== undefined) return value(ctx, given)
  const generated = `${ctx.stack}-${ctx.id}-1A2B3C4D5E6F`
  return ctx.resource.Type === 'AWS::S3::Bucket' ? generated.toLowerCase() : generated
}

/** The ARN of a resource (of the resource a policy, permission or filter belongs to). */
function resourceArn(ctx: Context): string {
  const p = ctx.resource.Properties
  switch (ctx.resource.Type) {
    case 'AWS::S3::Bucket':
      return `arn:aws:s3:::${physicalName(ctx)}`
    case 'AWS::S3::BucketPolicy':
      return `arn:aws:s3:::${value(ctx, p.Bucket)}`
    case 'AWS::Logs::LogGroup':
      return arn('logs', `log-group:${physicalName(ctx)}`)
    case 'AWS::Logs::MetricFilter':
      return arn('logs', `log-group:${value(ctx, p.LogGroupName)}`)
    case 'AWS::IAM::Role':
      return `arn:aws:iam::${ACCOUNT}:role/${physicalName(ctx)}`
    case 'AWS::Lambda::Function':
      return arn('lambda', `function:${physicalName(ctx)}`)
    case 'AWS::Lambda::EventInvokeConfig':
    case 'AWS::Lambda::Permission':
      return arn('lambda', `function:${value(ctx, p.FunctionName)}`)
    case 'AWS::Events::Rule':
      return arn('events', `rule/${physicalName(ctx)}`)
    case 'AWS::SNS::Topic':
      return arn('sns', physicalName(ctx))
    case 'AWS::SNS::Subscription':
      return value(ctx, p.TopicArn).startsWith('arn:') ? value(ctx, p.TopicArn) : arn('sns', value(ctx, p.TopicArn))
    case 'AWS::CloudWatch::Alarm':
      return arn('cloudwatch', `alarm:${physicalName(ctx)}`)
    case 'AWS::CloudWatch::Dashboard':
      return `arn:aws:cloudwatch::${ACCOUNT}:dashboard/${physicalName(ctx)}`
    default:
      throw new Error(`cfn-actions: no ARN for ${ctx.resource.Type}`)
  }
}

const roleOf = (ctx: Context) => {
  const [id] = (ctx.resource.Properties.Role as { 'Fn::GetAtt': [string] })['Fn::GetAtt']
  return resourceArn({ ...ctx, id, resource: ctx.resources[id] as Resource })
}
const codeOf = (ctx: Context) => {
  const code = ctx.resource.Properties.Code as { S3Bucket: unknown; S3Key: string }
  return `arn:aws:s3:::${value(ctx, code.S3Bucket)}/${code.S3Key}`
}
/** Stack tags (osls's STAGE) reach every resource that takes tags: tagging on create and update. */
const tags = (service: string, ...names: string[]) => names.map((n) => `${service}:${n}`)

const CFN_ACTIONS: Record<string, Grant[]> = {
  'AWS::S3::Bucket': [
    {
      actions: [
        's3:CreateBucket',
        's3:DeleteBucket',
        's3:ListBucket',
        's3:GetBucketLocation',
        's3:PutEncryptionConfiguration',
        's3:GetEncryptionConfiguration',
        's3:PutBucketPublicAccessBlock',
        's3:GetBucketPublicAccessBlock',
        's3:PutBucketVersioning',
        's3:GetBucketVersioning',
        's3:PutLifecycleConfiguration',
        's3:GetLifecycleConfiguration',
        ...tags('s3', 'PutBucketTagging', 'GetBucketTagging'),
      ],
    },
    { actions: ['s3:PutBucketLogging', 's3:GetBucketLogging'], when: (p) => p.LoggingConfiguration !== undefined },
  ],
  'AWS::S3::BucketPolicy': [{ actions: ['s3:PutBucketPolicy', 's3:GetBucketPolicy', 's3:DeleteBucketPolicy'] }],
  'AWS::Logs::LogGroup': [
    {
      actions: [
        'logs:CreateLogGroup',
        'logs:DeleteLogGroup',
        'logs:PutRetentionPolicy',
        'logs:DeleteRetentionPolicy',
        ...tags('logs', 'TagResource', 'UntagResource', 'ListTagsForResource', 'TagLogGroup', 'UntagLogGroup', 'ListTagsLogGroup'),
      ],
    },
    { actions: ['logs:DescribeLogGroups'], on: ANY },
  ],
  'AWS::Logs::MetricFilter': [
    { actions: ['logs:PutMetricFilter', 'logs:DeleteMetricFilter', 'logs:DescribeLogStreams'] },
    { actions: ['logs:DescribeMetricFilters'], on: ANY },
  ],
  'AWS::IAM::Role': [
    {
      actions: [
        'iam:CreateRole',
        'iam:GetRole',
        'iam:DeleteRole',
        'iam:UpdateAssumeRolePolicy',
        'iam:PutRolePolicy',
        'iam:GetRolePolicy',
        'iam:DeleteRolePolicy',
        'iam:ListRolePolicies',
        'iam:ListAttachedRolePolicies',
        ...tags('iam', 'TagRole', 'UntagRole'),
      ],
    },
    { actions: ['iam:AttachRolePolicy', 'iam:DetachRolePolicy'], when: (p) => p.ManagedPolicyArns !== undefined },
  ],
  'AWS::Lambda::Function': [
    {
      actions: [
        'lambda:CreateFunction',
        'lambda:DeleteFunction',
        'lambda:GetFunction',
        'lambda:GetFunctionConfiguration',
        'lambda:UpdateFunctionCode',
        'lambda:UpdateFunctionConfiguration',
        'lambda:GetFunctionCodeSigningConfig',
        'lambda:GetFunctionRecursionConfig',
        'lambda:GetRuntimeManagementConfig',
        'lambda:GetFunctionConcurrency',
        ...tags('lambda', 'TagResource', 'UntagResource', 'ListTags'),
      ],
    },
    // Reserving concurrency, and taking it back when a later deploy drops the setting.
    { actions: ['lambda:PutFunctionConcurrency', 'lambda:DeleteFunctionConcurrency'] },
    { actions: ['iam:PassRole'], on: roleOf },
    // Lambda fetches the code with the caller's credentials.
    { actions: ['s3:GetObject'], on: codeOf },
    { actions: ['ec2:DescribeSecurityGroups', 'ec2:DescribeSubnets', 'ec2:DescribeVpcs'], on: ANY, when: (p) => p.VpcConfig !== undefined },
  ],
  'AWS::Lambda::EventInvokeConfig': [
    {
      actions: [
        'lambda:PutFunctionEventInvokeConfig',
        'lambda:UpdateFunctionEventInvokeConfig',
        'lambda:GetFunctionEventInvokeConfig',
        'lambda:DeleteFunctionEventInvokeConfig',
      ],
    },
  ],
  'AWS::Lambda::Permission': [{ actions: ['lambda:AddPermission', 'lambda:RemovePermission', 'lambda:GetPolicy'] }],
  'AWS::Events::Rule': [
    {
      actions: [
        'events:PutRule',
        'events:DescribeRule',
        'events:DeleteRule',
        'events:PutTargets',
        'events:RemoveTargets',
        'events:ListTargetsByRule',
        ...tags('events', 'TagResource', 'UntagResource', 'ListTagsForResource'),
      ],
    },
  ],
  'AWS::SNS::Topic': [
    {
      actions: [
        'sns:CreateTopic',
        'sns:DeleteTopic',
        'sns:GetTopicAttributes',
        'sns:SetTopicAttributes',
        'sns:GetDataProtectionPolicy',
        'sns:ListSubscriptionsByTopic',
        ...tags('sns', 'TagResource', 'UntagResource', 'ListTagsForResource'),
      ],
    },
  ],
  'AWS::SNS::Subscription': [
    { actions: ['sns:Subscribe', 'sns:ListSubscriptionsByTopic'] },
    // A subscription's ARN is its topic's plus an id.
    {
      actions: ['sns:Unsubscribe', 'sns:GetSubscriptionAttributes'],
      on: (ctx) => `${resourceArn(ctx)}:0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0`,
    },
  ],
  'AWS::CloudWatch::Alarm': [
    {
      actions: [
        'cloudwatch:PutMetricAlarm',
        'cloudwatch:DeleteAlarms',
        ...tags('cloudwatch', 'TagResource', 'UntagResource', 'ListTagsForResource'),
      ],
    },
    { actions: ['cloudwatch:DescribeAlarms'], on: ANY },
  ],
  'AWS::CloudWatch::Dashboard': [{ actions: ['cloudwatch:PutDashboard', 'cloudwatch:GetDashboard', 'cloudwatch:DeleteDashboards'] }],
}

/** Every [action, ARN] CloudFormation asks the deployer for, for every resource of a template. */
export function templateCalls(stack: string, resources: Record<string, Resource>): { id: string; action: string; arn: string }[] {
  return Object.entries(resources).flatMap(([id, resource]) => {
    const grants = CFN_ACTIONS[resource.Type]
    if (!grants) throw new Error(`cfn-actions: ${resource.Type} (${id}) is new to the stack: add what CloudFormation calls for it`)
    const ctx: Context = { stack, id, resource, resources }
    return grants
      .filter((g) => g.when?.(resource.Properties) ?? true)
      .flatMap((g) => g.actions.map((action) => ({ id, action, arn: (g.on ?? resourceArn)(ctx) })))
  })
}
