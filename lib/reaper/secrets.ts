/**
 * Secrets read at run time: the reaper's Redis URL (password included) lives in an SSM Parameter Store
 * SecureString and the function reads it when a container starts (GetParameter, WithDecryption), so
 * neither the CloudFormation template nor the function's configuration ever holds it. The caller keeps
 * the value for the container's life (functions/sweep.ts keeps the configuration built from it).
 *
 * The value never appears in a message: errors name the parameter, the AWS error's name, HTTP status and
 * request id, and carry no `cause` (an SDK error can hold the raw response). A call is bounded
 * (SSM_TIMEOUT_MS, two attempts): a function in a VPC with no route to SSM fails fast with a hint instead
 * of waiting for its timeout. The endpoint follows the SDK's settings (AWS_REGION, AWS_ENDPOINT_URL_SSM).
 */
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm'
import { EchoMQError } from '../errors.js'
import { boundedClientOptions, deadline, describeAwsError, isTimeout } from './aws.js'

/** The whole read, retries included. */
export const SSM_TIMEOUT_MS = 3_000

let sharedClient: SSMClient | undefined

/** One client per process (a Lambda container), made at the first read. */
function ssmClient(timeoutMs: number): SSMClient {
  if (!sharedClient) sharedClient = new SSMClient(boundedClientOptions(timeoutMs))
  return sharedClient
}

export interface ReadSecretOptions {
  client?: SSMClient
  timeoutMs?: number
  /** Told when the parameter is a plain String (stored unencrypted). */
  warn?: (message: string) => void
}

/** The decrypted value of an SSM parameter; an ERR_CONFIG error naming the parameter otherwise. */
export async function readSecret(name: string, options: ReadSecretOptions = {}): Promise<string> {
  const timeoutMs = options.timeoutMs ?? SSM_TIMEOUT_MS
  const client = options.client ?? ssmClient(timeoutMs)
  let parameter: { Type?: string | undefined; Value?: string | undefined } | undefined
  try {
    ;({ Parameter: parameter } = await client.send(new GetParameterCommand({ Name: name, WithDecryption: true }), deadline(timeoutMs)))
  } catch (err) {
    throw new EchoMQError('ERR_CONFIG', `SSM parameter ${name}: ${explain(err, name, timeoutMs)}`)
  }
  if (!parameter?.Value) throw new EchoMQError('ERR_CONFIG', `SSM parameter ${name}: the reply holds no value`)
  if (parameter.Type !== 'SecureString') {
    options.warn?.(
      `SSM parameter ${name} is a ${parameter.Type ?? 'parameter of unknown type'}, not a SecureString: its value is stored unencrypted`,
    )
  }
  return parameter.Value
}

function explain(err: unknown, parameter: string, timeoutMs: number): string {
  const { errorName, error, httpStatus, requestId } = describeAwsError(err)
  const ids = [httpStatus === undefined ? '' : `HTTP ${httpStatus}`, requestId ? `request id ${requestId}` : ''].filter(Boolean).join(', ')
  const what = `${errorName}${ids ? ` (${ids})` : ''}`
  if (errorName === 'ParameterNotFound') {
    return `${what}: create it with aws ssm put-parameter --type SecureString --name ${parameter} --value 'rediss://user:password@host:6379' (README: deploy guide)`
  }
  if (errorName === 'AccessDeniedException') return `${what}: the function's role needs ssm:GetParameter on it: ${error}`
  if (errorName === 'InvalidKeyId' || /KMS/i.test(errorName)) return `${what}: the role needs kms:Decrypt on the parameter's key: ${error}`
  if (isTimeout(err)) {
    return `${what}: no answer within ${timeoutMs} ms; a function in a VPC needs a NAT gateway or an SSM interface endpoint (com.amazonaws.<region>.ssm)`
  }
  return `${what}: ${error}`
}
