/**
 * checkov's CloudFormation rules for the resource types of the reaper's stack, each condition as checkov's
 * own check reads the template (bridgecrewio/checkov, checkov/cloudformation/checks/resource/aws/: S3AccessLogs,
 * S3Versioning, S3BlockPublicACLs..., and the cloudsplaining-based IAM checks), so the rules can be checked
 * where checkov cannot be installed. `RESOURCE_TYPES_WITHOUT_RULES` are the types checkov has no
 * CloudFormation rule for; a type in neither list fails the check until someone looks.
 */
import type { Resource } from './packaging.js'

type Props = Record<string, unknown>
export interface Rule {
  id: string
  type: string
  /** PASSED for this resource, as checkov decides it. */
  passes(props: Props): boolean
}

const at = (props: Props, path: string): unknown =>
  path.split('/').reduce<unknown>((v, k) => {
    if (v === null || typeof v !== 'object') return undefined
    const index = /^\[(\d+)\]$/.exec(k)
    return index ? (v as unknown[])[Number(index[1])] : (v as Props)[k]
  }, props)

const present = (path: string) => (p: Props) => at(p, path) !== undefined
const isTrue = (path: string) => (p: Props) => at(p, path) === true

/** The role's inline statements and trust statements. */
const statements = (p: Props) =>
  ((p.Policies as { PolicyDocument: { Statement: Props[] } }[] | undefined) ?? []).flatMap((policy) => policy.PolicyDocument.Statement)
const list = (v: unknown): unknown[] => [v].flat()
/** Actions IAM allows only on "*" (they take no resource ARN): cloudsplaining leaves them out of its resource checks. */
const WILDCARD_ONLY = new Set(['cloudwatch:PutMetricData'])
/** No Allow statement grants a wildcard action, nor a resource-taking action on "*" (cloudsplaining's "without constraints"). */
const constrained = (p: Props) =>
  statements(p).every(
    (s) =>
      s.Effect !== 'Allow' ||
      list(s.Action).every((a) => typeof a === 'string' && !a.includes('*') && (!list(s.Resource).includes('*') || WILDCARD_ONLY.has(a))),
  )
/** What detect-secrets (checkov's secret scanning of values) finds: credentials in a URL, an AWS key, a private key. */
const SECRET = /:\/\/[^/\s:@]+:[^@\s]+@|\b(AKIA|ASIA)[0-9A-Z]{16}\b|-----BEGIN [A-Z ]*PRIVATE KEY-----/
/** checkov's DeprecatedLambdaRuntime list, and what Lambda has deprecated since. */
const DEPRECATED_RUNTIMES =
  /^(nodejs(4\.3(-edge)?|6\.10|8\.10|10\.x|12\.x|14\.x|16\.x|18\.x)?|python(2\.7|3\.[6-9])|java8|go1\.x|provided|ruby2\.[57]|dotnet(core[123]\.[01]|5\.0|6|7))$/

export const RULES: Rule[] = [
  { id: 'CKV_AWS_18', type: 'AWS::S3::Bucket', passes: present('LoggingConfiguration') },
  {
    id: 'CKV_AWS_19',
    type: 'AWS::S3::Bucket',
    passes: (p) =>
      ['AES256', 'aws:kms', undefined].includes(
        at(p, 'BucketEncryption/ServerSideEncryptionConfiguration/[0]/ServerSideEncryptionByDefault/SSEAlgorithm') as string,
      ),
  },
  { id: 'CKV_AWS_20', type: 'AWS::S3::Bucket', passes: (p) => !['PublicRead', 'PublicReadWrite'].includes(p.AccessControl as string) },
  { id: 'CKV_AWS_21', type: 'AWS::S3::Bucket', passes: (p) => at(p, 'VersioningConfiguration/Status') === 'Enabled' },
  { id: 'CKV_AWS_53', type: 'AWS::S3::Bucket', passes: isTrue('PublicAccessBlockConfiguration/BlockPublicAcls') },
  { id: 'CKV_AWS_54', type: 'AWS::S3::Bucket', passes: isTrue('PublicAccessBlockConfiguration/BlockPublicPolicy') },
  { id: 'CKV_AWS_55', type: 'AWS::S3::Bucket', passes: isTrue('PublicAccessBlockConfiguration/IgnorePublicAcls') },
  { id: 'CKV_AWS_56', type: 'AWS::S3::Bucket', passes: isTrue('PublicAccessBlockConfiguration/RestrictPublicBuckets') },
  { id: 'CKV_AWS_57', type: 'AWS::S3::Bucket', passes: (p) => p.AccessControl !== 'PublicReadWrite' },
  { id: 'CKV_AWS_26', type: 'AWS::SNS::Topic', passes: present('KmsMasterKeyId') },
  {
    id: 'CKV_AWS_45',
    type: 'AWS::Lambda::Function',
    passes: (p) => Object.values((at(p, 'Environment/Variables') as Props | undefined) ?? {}).every((v) => !SECRET.test(String(v))),
  },
  { id: 'CKV_AWS_115', type: 'AWS::Lambda::Function', passes: present('ReservedConcurrentExecutions') },
  { id: 'CKV_AWS_116', type: 'AWS::Lambda::Function', passes: present('DeadLetterConfig/TargetArn') },
  { id: 'CKV_AWS_117', type: 'AWS::Lambda::Function', passes: present('VpcConfig') },
  {
    id: 'CKV_AWS_173',
    type: 'AWS::Lambda::Function',
    passes: (p) => at(p, 'Environment/Variables') === undefined || p.KmsKeyArn !== undefined,
  },
  { id: 'CKV_AWS_363', type: 'AWS::Lambda::Function', passes: (p) => !DEPRECATED_RUNTIMES.test(String(p.Runtime)) },
  {
    id: 'CKV_AWS_364',
    type: 'AWS::Lambda::Permission',
    passes: (p) => !/^[\w-]+\.amazonaws\.com$/.test(String(p.Principal)) || p.SourceArn !== undefined || p.SourceAccount !== undefined,
  },
  { id: 'CKV_AWS_66', type: 'AWS::Logs::LogGroup', passes: present('RetentionInDays') },
  { id: 'CKV_AWS_158', type: 'AWS::Logs::LogGroup', passes: present('KmsKeyId') },
  {
    id: 'CKV_AWS_60',
    type: 'AWS::IAM::Role',
    passes: (p) =>
      ((at(p, 'AssumeRolePolicyDocument/Statement') as Props[] | undefined) ?? []).every(
        (s) => s.Effect === 'Deny' || !list(at(s, 'Principal/AWS')).includes('*'),
      ),
  },
  {
    id: 'CKV_AWS_61',
    type: 'AWS::IAM::Role',
    passes: (p) =>
      !/^arn:aws:iam::\d{12}:root$|^\d{12}$/.test(String(list(at(p, 'AssumeRolePolicyDocument/Statement/[0]/Principal/AWS'))[0])),
  },
  {
    id: 'CKV_AWS_62',
    type: 'AWS::IAM::Role',
    passes: (p) => !statements(p).some((s) => s.Effect === 'Allow' && list(s.Action).includes('*') && list(s.Resource).includes('*')),
  },
  {
    id: 'CKV_AWS_63',
    type: 'AWS::IAM::Role',
    passes: (p) => !statements(p).some((s) => s.Effect === 'Allow' && list(s.Action).includes('*')),
  },
  // cloudsplaining: credentials exposure, data exfiltration, permissions management, privilege escalation and
  // write access, each for actions granted without a resource constraint (Resource "*").
  { id: 'CKV_AWS_107', type: 'AWS::IAM::Role', passes: constrained },
  { id: 'CKV_AWS_108', type: 'AWS::IAM::Role', passes: constrained },
  { id: 'CKV_AWS_109', type: 'AWS::IAM::Role', passes: constrained },
  {
    id: 'CKV_AWS_110',
    type: 'AWS::IAM::Role',
    passes: (p) => constrained(p) && !statements(p).some((s) => list(s.Action).some((a) => String(a).startsWith('iam:'))),
  },
  { id: 'CKV_AWS_111', type: 'AWS::IAM::Role', passes: constrained },
]

const RESOURCE_TYPES_WITHOUT_RULES = [
  'AWS::S3::BucketPolicy',
  'AWS::Lambda::EventInvokeConfig',
  'AWS::Events::Rule',
  'AWS::Logs::MetricFilter',
  'AWS::SNS::Subscription',
  'AWS::CloudWatch::Alarm',
  'AWS::CloudWatch::Dashboard',
]

/** Each rule that applies to a template, and the logical ids of the resources that fail it. */
export function evaluate(resources: Record<string, Resource>): Map<string, string[]> {
  const out = new Map<string, string[]>()
  for (const [id, r] of Object.entries(resources)) {
    const rules = RULES.filter((rule) => rule.type === r.Type)
    if (rules.length === 0 && !RESOURCE_TYPES_WITHOUT_RULES.includes(r.Type))
      throw new Error(`checkov-rules: ${r.Type} (${id}) is new to the stack: list checkov's rules for it`)
    for (const rule of rules) out.set(rule.id, [...(out.get(rule.id) ?? []), ...(rule.passes(r.Properties) ? [] : [id])])
  }
  return out
}
