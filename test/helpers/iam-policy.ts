/**
 * Just enough of IAM policy evaluation to check docs/deployer-policy.json: Allow statements, `*` and `?`
 * wildcards in actions (case-insensitive) and resources; conditions are not evaluated (a statement with one
 * is reported, so a check can say which grants depend on it). And the AWS SDK calls osls makes on the way of
 * `serverless deploy` and `serverless remove`, read from its own source.
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'

export interface Statement {
  Sid?: string
  Effect: 'Allow' | 'Deny'
  Action: string | string[]
  Resource: string | string[]
  Condition?: Record<string, unknown>
}
export interface Policy {
  Version: string
  Statement: Statement[]
}

const glob = (pattern: string, flags = '') =>
  new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
    flags,
  )

/** The Allow statements that grant `action` on `resource` (none: denied by default). */
function grants(policy: Policy, action: string, resource: string): Statement[] {
  return policy.Statement.filter(
    (s) =>
      s.Effect === 'Allow' &&
      [s.Action].flat().some((a) => glob(a, 'i').test(action)) &&
      [s.Resource].flat().some((r) => glob(r).test(resource)),
  )
}

export const allows = (policy: Policy, action: string, resource: string) => grants(policy, action, resource).length > 0

/**
 * The files of osls (the `serverless` command) that run during `deploy` (its info step included) and
 * `remove`, under node_modules/osls/lib/plugins/aws/.
 */
const OSLS_DEPLOY_REMOVE_FILES = [
  'deploy/lib/check-for-changes.js',
  'deploy/lib/cleanup-s3-bucket.js',
  'deploy/lib/create-stack.js',
  'deploy/lib/ensure-valid-bucket-exists.js',
  'deploy/lib/extended-validate.js',
  'deploy/lib/upload-artifacts.js',
  'deploy/lib/validate-template.js',
  'deletion-protection.js',
  'info/get-api-key-values.js',
  'info/get-resource-count.js',
  'info/get-stack-info.js',
  'lib/check-if-bucket-exists.js',
  'lib/check-if-ecr-repository-exists.js',
  'lib/monitor-stack.js',
  'lib/set-bucket-name.js',
  'lib/update-stack.js',
  'lib/upload-s3-object.js',
  'lib/upload-zip-file.js',
  'lib/wait-for-change-set-creation.js',
  'provider.js',
  'remove/lib/bucket.js',
  'remove/lib/ecr.js',
  'remove/lib/stack.js',
]

/**
 * Every AWS call in those files, as `<client>:<Command>` (`s3:ListObjectsV2`, `cloudformation:CreateChangeSet`):
 * `new XCommand(`, `paginateX(` and lib-storage's `new Upload(` (PutObject, or a multipart upload above 5 MB).
 */
export function oslsCalls(oslsRoot: string): Set<string> {
  const calls = new Set<string>()
  for (const file of OSLS_DEPLOY_REMOVE_FILES) {
    const text = readFileSync(path.join(oslsRoot, 'lib/plugins/aws', file), 'utf8')
    // Which client package each imported name comes from: const { A, BCommand } = require('@aws-sdk/client-x')
    const clientOf = new Map<string, string>()
    for (const m of text.matchAll(/\{([^}]*)\}\s*=\s*require\('@aws-sdk\/client-([\w-]+)'\)/g)) {
      for (const name of (m[1] ?? '').split(',').map((n) => n.trim())) if (name) clientOf.set(name, m[2] ?? '')
    }
    const client = (name: string) => {
      const c = clientOf.get(name)
      if (c === undefined) throw new Error(`osls ${file}: ${name} comes from no @aws-sdk/client-* require`)
      return c
    }
    for (const m of text.matchAll(/new (\w+)Command\(/g)) calls.add(`${client(`${m[1]}Command`)}:${m[1]}`)
    for (const m of text.matchAll(/\bpaginate(\w+)\(/g)) calls.add(`${client(`paginate${m[1]}`)}:${m[1]}`)
    if (/new Upload\(/.test(text)) calls.add('s3:Upload')
  }
  return calls
}

/** Where an osls call lands: the stack, its change set, the deployment bucket, an object in it, the function, or any. */
export type Target = 'stack' | 'changeSet' | 'bucket' | 'object' | 'function' | '*'

/**
 * What each call osls makes needs from IAM (S3's HEAD and list calls are authorized as other actions), or why
 * this stack's deploy and remove do without it. CreateChangeSet and ValidateTemplate read the template from
 * the bucket with the caller's credentials; DeleteObjects deletes versions too when `remove` empties a
 * versioned bucket.
 */
export const OSLS_CALL_GRANTS: Record<string, { needs: [string, Target][] } | { notGranted: string }> = {
  'cloudformation:CreateChangeSet': {
    needs: [
      ['cloudformation:CreateChangeSet', 'stack'],
      ['cloudformation:CreateChangeSet', 'changeSet'],
      ['cloudformation:TagResource', 'stack'],
      ['s3:GetObject', 'object'],
    ],
  },
  'cloudformation:DescribeChangeSet': { needs: [['cloudformation:DescribeChangeSet', 'changeSet']] },
  'cloudformation:ExecuteChangeSet': { needs: [['cloudformation:ExecuteChangeSet', 'changeSet']] },
  'cloudformation:DeleteChangeSet': { needs: [['cloudformation:DeleteChangeSet', 'changeSet']] },
  'cloudformation:DescribeStacks': { needs: [['cloudformation:DescribeStacks', 'stack']] },
  'cloudformation:DescribeStackEvents': { needs: [['cloudformation:DescribeStackEvents', 'stack']] },
  'cloudformation:DescribeStackResource': { needs: [['cloudformation:DescribeStackResource', 'stack']] },
  'cloudformation:ListStackResources': { needs: [['cloudformation:ListStackResources', 'stack']] },
  'cloudformation:GetTemplate': { needs: [['cloudformation:GetTemplate', 'stack']] },
  'cloudformation:DeleteStack': { needs: [['cloudformation:DeleteStack', 'stack']] },
  'cloudformation:ValidateTemplate': {
    needs: [
      ['cloudformation:ValidateTemplate', '*'],
      ['s3:GetObject', 'object'],
    ],
  },
  'cloudformation:CreateStack': { notGranted: 'provider.deploymentMethod direct only; this stack deploys with change sets' },
  'cloudformation:UpdateStack': { notGranted: 'provider.deploymentMethod direct only; this stack deploys with change sets' },
  'cloudformation:SetStackPolicy': { notGranted: 'only with provider.stackPolicy' },
  'cloudformation:UpdateTerminationProtection': { notGranted: 'only with provider.deletionProtection' },
  'cloudformation:DescribeStackResources': { notGranted: 'only for API Gateway API keys (info)' },
  'cloudformation:ListExports': { notGranted: 'only for an external HTTP API (info)' },
  'api-gateway:GetApiKey': { notGranted: 'only for API Gateway API keys (info)' },
  'apigatewayv2:GetApi': { notGranted: 'only for an HTTP API (info)' },
  'cloudwatch-logs:DescribeSubscriptionFilters': { notGranted: 'only for cloudwatchLog events' },
  'cloudwatch-logs:DeleteSubscriptionFilter': { notGranted: 'only for cloudwatchLog events' },
  'ecr:DescribeRepositories': { notGranted: 'remove asks, and takes a refusal for "no repository": no container image here' },
  'ecr:CreateRepository': { notGranted: 'container images only' },
  'ecr:DeleteRepository': { notGranted: 'container images only' },
  'ecr:DescribeImages': { notGranted: 'container images only' },
  'ecr:GetAuthorizationToken': { notGranted: 'container images only' },
  'ecr:PutLifecyclePolicy': { notGranted: 'container images only' },
  'lambda:GetFunction': { needs: [['lambda:GetFunction', 'function']] },
  's3:HeadBucket': { needs: [['s3:ListBucket', 'bucket']] },
  's3:HeadObject': { needs: [['s3:GetObject', 'object']] },
  's3:ListObjectsV2': { needs: [['s3:ListBucket', 'bucket']] },
  's3:ListObjectVersions': { needs: [['s3:ListBucketVersions', 'bucket']] },
  's3:DeleteObjects': {
    needs: [
      ['s3:DeleteObject', 'object'],
      ['s3:DeleteObjectVersion', 'object'],
    ],
  },
  's3:Upload': { needs: [['s3:PutObject', 'object']] },
  'sts:GetCallerIdentity': { notGranted: 'needs no permission: IAM cannot deny it' },
}
