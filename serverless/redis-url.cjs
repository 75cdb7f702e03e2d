// Where the deployed function gets its Redis URL. By default it reads, at run time, the SSM SecureString
// that the redisUrlParameter parameter names: the template holds that name and a grant to read it, never
// the URL, and packaging needs no AWS call. The redisUrl parameter (development only) puts a plain URL into
// the function's environment instead, and so into the template and the Lambda console: it warns.
const { fail, param, warn } = require('./params.cjs')

async function parameterName(resolveVariable) {
  const name = await param(resolveVariable, 'redisUrlParameter')
  if (!/^\/?[A-Za-z0-9_.\-/]{1,1011}$/.test(name)) {
    fail(`redisUrlParameter: expected an SSM parameter name such as /echomq/prod/redis-url, got: ${JSON.stringify(name)}`)
  }
  return name
}

module.exports = {
  /** REDIS_URL: the redisUrl parameter, or nothing (null: the variable is left out). */
  async plainUrl({ resolveVariable }) {
    const url = await param(resolveVariable, 'redisUrl')
    if (url === '') return null
    warn(
      'the redisUrl parameter puts the Redis URL, password included, into the function environment and the ' +
        'CloudFormation template. Use it for development only; otherwise store the URL in the SSM SecureString ' +
        'named by redisUrlParameter (README: deploy guide).',
    )
    return url
  },

  /** REDIS_URL_PARAMETER. */
  async parameterName({ resolveVariable }) {
    return parameterName(resolveVariable)
  },

  /** The parameter's ARN (a name without a leading slash gets one in the ARN). */
  async parameterArn({ resolveVariable }) {
    const name = await parameterName(resolveVariable)
    const path = name.startsWith('/') ? name : `/${name}`
    return { 'Fn::Sub': `arn:\${AWS::Partition}:ssm:\${AWS::Region}:\${AWS::AccountId}:parameter${path}` }
  },

  /**
   * The key kms:Decrypt is granted on: kmsKeyArn, else any key of the account in the region (aws/ssm's id is
   * not known at package time); either way only through SSM and only for this parameter (the conditions).
   */
  async kmsKey({ resolveVariable }) {
    const arn = await param(resolveVariable, 'kmsKeyArn')
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub string, not a template literal
    if (arn === '') return { 'Fn::Sub': 'arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/*' }
    // IAM matches kms:Decrypt against the key's ARN, never an alias's.
    if (!/^arn:[\w-]+:kms:[\w-]+:\d{12}:key\/.+$/.test(arn))
      fail(`kmsKeyArn: expected a KMS key ARN (…:key/<id>, not an alias), got: ${JSON.stringify(arn)}`)
    return arn
  },
}
