/**
 * Secrets read at run time: the reaper's Redis URL (password included) lives in an SSM Parameter Store
 * SecureString, read with Powertools for AWS Lambda's Parameters utility (SSMProvider: GetParameter,
 * WithDecryption), so neither the CloudFormation template nor the function's configuration ever holds it.
 * A reader (one per Lambda container) keeps the value for `maxAgeS` (the reaper's secretMaxAgeS, 300 s by
 * default): the handler asks again on every invocation and SSM is called once the value has aged, so a rotated password is picked up within
 * that time without waiting for a connection failure; after a failure that a stale value may explain
 * (refused credentials, Redis unreachable) the handler reads it again at once (`forceFetch`).
 *
 * The value never appears in a message: errors name the parameter, the AWS error's name, HTTP status and
 * request id, and carry no `cause` (an SDK error can hold the raw response), with `variable`
 * REDIS_URL_PARAMETER and a `hint`: ParameterNotFound (create it), AccessDeniedException on SSM (the role's
 * ssm:GetParameter) or on KMS (the role's or the key policy's kms:Decrypt), no answer (a VPC without a
 * route to SSM), no connection (refused, a name that does not resolve: nothing reached AWS, so no
 * CloudTrail hint). A read is bounded (SSM_TIMEOUT_MS in all, two attempts): a function in a VPC with no route
 * to SSM fails fast instead of waiting for its timeout. The endpoint follows the SDK's settings
 * (AWS_REGION, AWS_ENDPOINT_URL_SSM).
 */
import { SSMProvider } from '@aws-lambda-powertools/parameters/ssm'
import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm'
import { EchoMQError } from '../errors.js'
import { boundedClientOptions, describeAwsError, isTimeout } from './aws.js'

/** The whole read, retries included. */
export const SSM_TIMEOUT_MS = 3_000

/**
 * SSMProvider, keeping each parameter's type from the reply (GetParameter, as the provider sends it), so
 * a plain String parameter can be reported.
 */
class TypedSsmProvider extends SSMProvider {
  readonly types = new Map<string, string | undefined>()

  protected override async _get(name: string, options?: { decrypt?: boolean }): Promise<string | undefined> {
    const { Parameter } = await this.client.send(new GetParameterCommand({ Name: name, WithDecryption: options?.decrypt ?? false }))
    this.types.set(name, Parameter?.Type)
    return Parameter?.Value
  }
}

export interface SecretReaderOptions {
  /** An SSM client of one's own (tests); default: one bounded by timeoutMs. */
  client?: SSMClient
  timeoutMs?: number
}

export interface ReadOptions {
  /** Seconds a value read is reused (0: always read). */
  maxAgeS?: number
  /** Read now, whatever the age of the value kept. */
  forceFetch?: boolean
  /** Told when the parameter is a plain String (stored unencrypted). */
  warn?: (message: string) => void
}

/** Reads SSM parameters, keeping each value for its max age: one reader per container (its cache). */
export type SecretReader = (name: string, options?: ReadOptions) => Promise<string>

export function secretReader({ client, timeoutMs = SSM_TIMEOUT_MS }: SecretReaderOptions = {}): SecretReader {
  const provider = new TypedSsmProvider(client ? { awsSdkV3Client: client } : { clientConfig: boundedClientOptions(timeoutMs) })
  return async (name, options = {}) => {
    const fetching = !provider.types.has(name) || options.forceFetch === true
    let value: string | undefined
    let timer: NodeJS.Timeout | undefined
    try {
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { name: 'TimeoutError' })), timeoutMs)
      })
      const read = provider.get(name, { decrypt: true, maxAge: options.maxAgeS ?? 0, forceFetch: options.forceFetch ?? false })
      value = await Promise.race([read, deadline])
    } catch (err) {
      // Powertools wraps the SDK's error (GetParameterError); its cause is the AWS error.
      const aws = (err as { name?: string }).name === 'GetParameterError' ? (err as { cause?: unknown }).cause : err
      const { message, hint } = explain(aws, name, timeoutMs)
      throw new EchoMQError('ERR_CONFIG', `SSM parameter ${name}: ${message}`, { variable: 'REDIS_URL_PARAMETER', hint })
    } finally {
      clearTimeout(timer)
    }
    if (!value) throw new EchoMQError('ERR_CONFIG', `SSM parameter ${name}: the reply holds no value`, { variable: 'REDIS_URL_PARAMETER' })
    const type = provider.types.get(name)
    if (fetching && type !== 'SecureString') {
      options.warn?.(
        `SSM parameter ${name} is a ${type ?? 'parameter of unknown type'}, not a SecureString: its value is stored unencrypted`,
      )
    }
    return value
  }
}

/** The decrypted value of an SSM parameter, read now; an ERR_CONFIG error naming the parameter otherwise. */
export function readSecret(name: string, options: SecretReaderOptions & ReadOptions = {}): Promise<string> {
  return secretReader(options)(name, options)
}

/** The failure, and what to do about it (also kept in the message, which is what Lambda shows). */
function explain(err: unknown, parameter: string, timeoutMs: number): { message: string; hint: string } {
  const { errorName, error, httpStatus, requestId } = describeAwsError(err)
  const ids = [httpStatus === undefined ? '' : `HTTP ${httpStatus}`, requestId ? `request id ${requestId}` : ''].filter(Boolean).join(', ')
  const what = `${errorName}${ids ? ` (${ids})` : ''}`
  const hint = (text: string, detail = '') => ({ message: `${what}: ${text}${detail ? `: ${detail}` : ''}`, hint: text })
  if (errorName === 'ParameterNotFound') {
    return hint(
      `create it with aws ssm put-parameter --type SecureString --name ${parameter} --value 'rediss://user:password@host:6379' ` +
        '(README: deploy guide)',
    )
  }
  // SSM reports KMS's refusal as its own AccessDeniedException, naming KMS (or kms:Decrypt) in the text.
  if (errorName === 'InvalidKeyId' || /KMS/i.test(errorName) || (errorName === 'AccessDeniedException' && /kms/i.test(error))) {
    return hint(
      "KMS refused to decrypt the parameter: the role needs kms:Decrypt on the parameter's key (with a customer-managed " +
        'key, deploy with --param kmsKeyArn=<key ARN>), and the key policy must allow the role (README: deploy guide, step 2)',
      error,
    )
  }
  if (errorName === 'AccessDeniedException') return hint(`the function's role needs ssm:GetParameter on ${parameter}`, error)
  if (isTimeout(err)) {
    return hint(
      `no answer within ${timeoutMs} ms; a function in a VPC needs a NAT gateway or an SSM interface endpoint (com.amazonaws.<region>.ssm)`,
    )
  }
  if (httpStatus === undefined && NETWORK_ERROR.test(`${networkCode(err)} ${error}`)) {
    return hint(
      `nothing reached SSM (${error}): check AWS_REGION and AWS_ENDPOINT_URL_SSM if set; with an SSM interface endpoint ` +
        '(com.amazonaws.<region>.ssm), private DNS must be on and its security group must allow HTTPS (443) from the function',
    )
  }
  return { message: `${what}: ${error}`, hint: 'the AWS error names the cause; its request id finds the call in CloudTrail' }
}

/** Failures of the connection itself: no request reached AWS, so CloudTrail has nothing to find. */
const NETWORK_ERROR =
  /ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EPIPE|socket hang up|certificate|CERT_|SSL/i

const networkCode = (err: unknown): string => String((err as { code?: unknown } | null)?.code ?? '')
