/**
 * Where the Redis URL comes from, for every entry point (the Lambda reaper, `echomq sweep` and the other
 * commands): an explicit value (an option or `--redis-url`), else REDIS_URL, else the SSM SecureString
 * that REDIS_URL_PARAMETER names (read at run time by the caller: the password stays out of templates and
 * environments), else, outside Lambda only, redis://127.0.0.1:6379. A function running in Lambda with
 * neither variable fails with ERR_CONFIG rather than silently using a localhost that is not there.
 */
import { EchoMQError } from '../errors.js'
import { REDIS_URL_DEFAULT } from './connection.js'

type Env = Record<string, string | undefined>

/** A URL and what set it (for messages; `fallback` when nothing did), or the SSM parameter to read it from. */
export type UrlSource = { name: string; value: string; fallback?: true } | { parameter: string }

/** A function running in AWS Lambda, not under `serverless invoke local`. */
function inLambda(env: Env): boolean {
  return Boolean(env.AWS_LAMBDA_FUNCTION_NAME) && env.IS_LOCAL !== 'true'
}

/** SSM names: letters, digits, _ . - / (a path), or a parameter ARN. */
const SSM_PARAMETER = /^[A-Za-z0-9_.\-/:]{1,2048}$/

export function redisUrlSource(explicit: { name: string; value: string } | undefined, env: Env): UrlSource {
  if (explicit !== undefined) return explicit
  const url = env.REDIS_URL?.trim()
  if (url) return { name: 'REDIS_URL', value: url }
  const parameter = env.REDIS_URL_PARAMETER?.trim()
  if (parameter) {
    if (!SSM_PARAMETER.test(parameter)) {
      throw new EchoMQError(
        'ERR_CONFIG',
        `REDIS_URL_PARAMETER: expected an SSM parameter name such as /echomq/prod/redis-url, got: ${JSON.stringify(parameter)}`,
        { variable: 'REDIS_URL_PARAMETER' },
      )
    }
    return { parameter }
  }
  if (inLambda(env)) {
    throw new EchoMQError(
      'ERR_CONFIG',
      'REDIS_URL_PARAMETER: not set, and neither is REDIS_URL: a function in Lambda reads its Redis URL from the SSM SecureString ' +
        'REDIS_URL_PARAMETER names (serverless.yml sets it from the redisUrlParameter param), or from REDIS_URL for development; ' +
        `it does not fall back to ${REDIS_URL_DEFAULT}`,
      { variable: 'REDIS_URL_PARAMETER' },
    )
  }
  return { name: 'REDIS_URL', value: REDIS_URL_DEFAULT, fallback: true }
}
