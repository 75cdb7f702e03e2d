/**
 * The Redis URL at run time: the handler reads it from an SSM SecureString (the real SSMClient against a
 * local SSM endpoint, AWS_ENDPOINT_URL_SSM) and sweeps a real Redis with it; the URL's password never
 * reaches a log line or an error; a function in Lambda without a URL source fails instead of using localhost.
 */
import { inspect } from 'node:util'
import { SSMClient } from '@aws-sdk/client-ssm'
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { EchoMQError } from '../../lib/errors.js'
import { boundedClientOptions } from '../../lib/reaper/aws.js'
import { reaperConfig } from '../../lib/reaper/config.js'
import { readSecret } from '../../lib/reaper/secrets.js'
import { startBlackhole } from '../helpers/cloudwatch-endpoint.js'
import { useQueues } from '../helpers/fixture.js'
import { stubLocalAws } from '../helpers/local-aws.js'
import { useCapturedLogs } from '../helpers/log-lines.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { freePort, useRedis } from '../helpers/redis-server.js'
import { SSM_REQUEST_ID, type SsmEndpoint, startSsmEndpoint } from '../helpers/ssm-endpoint.js'
import { waitFor } from '../helpers/wait.js'

const PASSWORD = 's3cret-pw'
const PARAMETER = '/echomq/test/redis-url'
const redis = useRedis()
const { open } = useQueues(redis)
let ssm: SsmEndpoint
const captured = useCapturedLogs()
/** A deployed function: in Lambda, the URL's name in the environment, no URL. */
const lambdaEnv = (extra: Record<string, string> = {}) => ({
  AWS_LAMBDA_FUNCTION_NAME: 'echomq-reaper-test-sweep',
  REDIS_URL_PARAMETER: PARAMETER,
  METRICS_MODE: 'off',
  SWEEP_GRACE_MS: '0',
  ...extra,
})
const context = { getRemainingTimeInMillis: () => 50_000 }
const aclUrl = (password = PASSWORD) => `redis://reaper:${password}@127.0.0.1:${redis.port}`

beforeAll(async () => {
  ssm = await startSsmEndpoint()
  stubLocalAws({ AWS_ENDPOINT_URL_SSM: ssm.url })
})
afterAll(async () => {
  vi.unstubAllEnvs()
  await ssm?.close()
})
beforeEach(async () => {
  await redis.client.call('ACL', 'SETUSER', 'reaper', 'on', 'resetpass', `>${PASSWORD}`, '~*', '&*', '+@all')
  ssm.requests.length = 0
  ssm.parameters.clear()
  ssm.parameters.set(PARAMETER, { value: aclUrl() })
})

describe('the Redis URL from SSM', () => {
  it('is read once per container, decrypted, and used to sweep; the password appears in no log line', async () => {
    await crashedJobs(redis.client, 'emails', 2)
    const handler = createHandler(lambdaEnv())

    const first = await handler({}, context)
    const second = await handler({}, context)
    await handler.close()

    expect(first.queues.emails).toEqual({ marked: 2, recovered: 0, failed: 0 })
    expect(second.queues.emails).toEqual({ marked: 0, recovered: 2, failed: 0 })
    expect(ssm.requests).toEqual([{ target: 'AmazonSSM.GetParameter', body: { Name: PARAMETER, WithDecryption: true } }])
    expect(captured.text.length).toBeGreaterThan(0)
    expect(captured.text.join('\n')).not.toContain(PASSWORD)
  })

  it('refused credentials are ERR_AUTH, not "unreachable"; the next invocation reads the URL again and picks up a rotated password', async () => {
    ssm.parameters.set(PARAMETER, { value: aclUrl('old-password') })
    const handler = createHandler(lambdaEnv({ QUEUES: 'a', REDIS_TIMEOUT_MS: '1000' }))

    const err = await handler({}, context).catch((e: unknown) => e)
    ssm.parameters.set(PARAMETER, { value: aclUrl() })
    const summary = await handler({}, context)
    await handler.close()

    expect(err).toBeInstanceOf(EchoMQError)
    expect(err).toMatchObject({ code: 'ERR_AUTH', message: expect.stringMatching(/refused the credentials: .*WRONGPASS/) })
    expect((err as EchoMQError).message).not.toMatch(/unreachable/)
    expect((err as EchoMQError).hint).toMatch(/check the user and password/)
    expect(captured.line('invocation failed')).toMatchObject({ level: 'ERROR', stream: 'stderr', errorCode: 'ERR_AUTH' })
    expect(inspect(err, { depth: 10 })).not.toContain('old-password')
    expect(summary.sweeps).toBe(1)
    expect(ssm.requests).toHaveLength(2)
    expect(captured.text.join('\n')).not.toMatch(/old-password|s3cret-pw/)
  })

  it('a value put from a file, with a trailing newline, works', async () => {
    ssm.parameters.set(PARAMETER, { value: `${aclUrl()}\n` })
    const handler = createHandler(lambdaEnv({ QUEUES: 'a' }))
    expect((await handler({}, context)).sweeps).toBe(1)
    await handler.close()
  })

  it('REDIS_URL, when set (a local run), wins and SSM is not called', async () => {
    const handler = createHandler(lambdaEnv({ REDIS_URL: redis.url, QUEUES: 'a' }))
    expect((await handler({}, context)).sweeps).toBe(1)
    await handler.close()
    expect(ssm.requests).toHaveLength(0)
  })

  it('a missing parameter fails with ERR_CONFIG naming it, the HTTP status, the request id and the fix; Redis is not touched', async () => {
    ssm.parameters.clear()
    await crashedJobs(redis.client, 'emails', 1)
    const handler = createHandler(lambdaEnv())

    const err = (await handler({}, context).catch((e: unknown) => e)) as EchoMQError

    expect(err).toBeInstanceOf(EchoMQError)
    expect(err.code).toBe('ERR_CONFIG')
    expect(err.message).toContain(`SSM parameter ${PARAMETER}: ParameterNotFound (HTTP 400, request id ${SSM_REQUEST_ID})`)
    expect(err.message).toMatch(/aws ssm put-parameter --type SecureString/)
    expect(await open('emails').counts()).toMatchObject({ active: 1, stalled: 0 })
  })

  it('access denied says which permission the role lacks', async () => {
    ssm.failWith({ status: 400, type: 'AccessDeniedException', message: 'not authorized to perform: ssm:GetParameter' })
    try {
      const err = await createHandler(lambdaEnv())({}, context).catch((e: unknown) => e)
      expect((err as Error).message).toMatch(/AccessDeniedException \(HTTP 400.*needs ssm:GetParameter/)
      expect(err).toMatchObject({ variable: 'REDIS_URL_PARAMETER', hint: expect.stringMatching(/ssm:GetParameter/) })
    } finally {
      ssm.failWith(undefined)
    }
  })

  it('a KMS denial (SSM answers AccessDeniedException naming KMS) gets a KMS hint, not "needs ssm:GetParameter"', async () => {
    // What SSM answers when the role may read the parameter but not decrypt it with its key.
    ssm.failWith({
      status: 400,
      type: 'AccessDeniedException',
      message:
        'User: arn:aws:sts::123456789012:assumed-role/echomq-reaper-test/fn is not authorized to perform: kms:Decrypt on resource: ' +
        'arn:aws:kms:eu-west-1:123456789012:key/1234abcd because no identity-based policy allows the kms:Decrypt action ' +
        '(Service: AWSKMS; Status Code: 400; Error Code: AccessDeniedException)',
    })
    try {
      const err = (await createHandler(lambdaEnv())({}, context).catch((e: unknown) => e)) as EchoMQError
      expect(err.code).toBe('ERR_CONFIG')
      expect(err.hint).toMatch(/^KMS refused to decrypt the parameter: the role needs kms:Decrypt on the parameter's key/)
      expect(err.message).not.toMatch(/needs ssm:GetParameter/)
      expect(captured.line('invocation failed')).toMatchObject({ errorCode: 'ERR_CONFIG', hint: err.hint, variable: 'REDIS_URL_PARAMETER' })
    } finally {
      ssm.failWith(undefined)
    }
  })

  it('is read again once its max age has passed, without a failure: a rotated password is picked up on time', async () => {
    const handler = createHandler(lambdaEnv({ QUEUES: 'a', POWERTOOLS_PARAMETERS_MAX_AGE: '1' }))
    await handler({}, context)
    await handler({}, context)
    expect(ssm.requests).toHaveLength(1)
    // The password changes in Redis and in SSM; the old connection still works until the URL is read again.
    await redis.client.call('ACL', 'SETUSER', 'reaper', 'resetpass', '>rotated-pw')
    ssm.parameters.set(PARAMETER, { value: aclUrl('rotated-pw') })
    await waitFor(
      async () => {
        await handler({}, context)
        return ssm.requests.length >= 2
      },
      { timeoutMs: 5_000, intervalMs: 100, what: 'the URL read again' },
    )
    await handler.close()
    expect(ssm.requests).toHaveLength(2)
    expect(captured.line(/Redis URL changed in SSM/)).toBeDefined()
    expect(captured.text.join('\n')).not.toMatch(/rotated-pw|s3cret-pw/)
  })

  it('a value that is not a Redis URL is rejected without being quoted', async () => {
    ssm.parameters.set(PARAMETER, { value: PASSWORD })
    const err = (await createHandler(lambdaEnv())({}, context).catch((e: unknown) => e)) as EchoMQError
    expect(err.code).toBe('ERR_CONFIG')
    expect(err.message).toMatch(new RegExp(`^SSM parameter ${PARAMETER}: expected a redis://`))
    expect(inspect(err, { depth: 10 })).not.toContain(PASSWORD)
  })

  it('a plain String parameter works, with a warning that it is stored unencrypted', async () => {
    ssm.parameters.set(PARAMETER, { value: aclUrl(), type: 'String' })
    const handler = createHandler(lambdaEnv({ QUEUES: 'a' }))
    expect((await handler({}, context)).sweeps).toBe(1)
    await handler.close()
    expect(captured.text.some((l) => l.includes('not a SecureString'))).toBe(true)
  })

  it('with no route to SSM (an endpoint that never answers) the read fails within its deadline with a hint', async () => {
    const blackhole = await startBlackhole()
    const client = new SSMClient({ endpoint: blackhole.url, ...boundedClientOptions(500) })
    const started = performance.now()
    try {
      const err = (await readSecret(PARAMETER, { client, timeoutMs: 500 }).catch((e: unknown) => e)) as EchoMQError
      expect(err.code).toBe('ERR_CONFIG')
      expect(err.message).toMatch(/no answer within 500 ms; a function in a VPC needs a NAT gateway or an SSM interface endpoint/)
    } finally {
      client.destroy()
      await blackhole.close()
    }
    expect(performance.now() - started).toBeLessThan(1_500)
  })

  it('an SSM endpoint that refuses the connection or does not resolve: nothing reached AWS, so no CloudTrail hint', async () => {
    for (const endpoint of [`http://127.0.0.1:${await freePort()}`, 'http://ssm.no-such-region.invalid']) {
      const client = new SSMClient({ endpoint, ...boundedClientOptions(500) })
      try {
        const err = (await readSecret(PARAMETER, { client, timeoutMs: 500 }).catch((e: unknown) => e)) as EchoMQError
        expect(err).toMatchObject({ code: 'ERR_CONFIG', variable: 'REDIS_URL_PARAMETER' })
        expect(err.hint).toMatch(/^nothing reached SSM \((connect ECONNREFUSED|getaddrinfo ENOTFOUND)/)
        expect(err.hint).toMatch(/AWS_ENDPOINT_URL_SSM.*private DNS must be on/)
        expect(`${err.message} ${err.hint}`).not.toMatch(/CloudTrail/)
      } finally {
        client.destroy()
      }
    }
  })
})

describe('no silent localhost', () => {
  it('in Lambda without REDIS_URL or REDIS_URL_PARAMETER: ERR_CONFIG naming both, before any Redis or AWS call', async () => {
    const err = (await createHandler({ AWS_LAMBDA_FUNCTION_NAME: 'f', METRICS_MODE: 'off' })({}, context).catch(
      (e: unknown) => e,
    )) as EchoMQError
    expect(err).toBeInstanceOf(EchoMQError)
    expect(err.code).toBe('ERR_CONFIG')
    expect(err.message).toMatch(/REDIS_URL_PARAMETER/)
    expect(err.message).toMatch(/REDIS_URL\b/)
    expect(err.message).toMatch(/does not fall back to redis:\/\/127\.0\.0\.1:6379/)
    expect(ssm.requests).toHaveLength(0)
  })

  it.each([
    ['outside Lambda (the CLI, tests)', {}],
    ['under serverless invoke local', { AWS_LAMBDA_FUNCTION_NAME: 'f', IS_LOCAL: 'true' }],
  ])('%s the local default stays', (_label, env) => {
    expect(reaperConfig({}, env).redisUrl).toBe('redis://127.0.0.1:6379')
  })
})
