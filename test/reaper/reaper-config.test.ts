/** The reaper's newer settings: where each comes from, and a bad value named with what was expected. */
import { describe, expect, it } from 'vitest'
import { EchoMQError } from '../../lib/errors.js'
import { loadReaperConfig, reaperConfig } from '../../lib/reaper/config.js'

const noSecret = async () => {
  throw new Error('no SSM read expected')
}

describe('metrics settings', () => {
  it.each([
    [{}, 'api'],
    [{ IS_LOCAL: 'true' }, 'off'],
    [{ IS_LOCAL: 'true', METRICS_MODE: 'emf' }, 'emf'],
    [{ POWERTOOLS_METRICS_DISABLED: 'true', METRICS_MODE: 'api' }, 'off'],
    [{ POWERTOOLS_METRICS_DISABLED: '1' }, 'off'],
    [{ POWERTOOLS_METRICS_DISABLED: 'false', METRICS_MODE: 'emf' }, 'emf'],
  ])('%j: metrics %s', (env, mode) => {
    expect(reaperConfig({}, env).metricsMode).toBe(mode)
  })

  it('an explicit option (the CLI flag) wins over POWERTOOLS_METRICS_DISABLED', () => {
    expect(reaperConfig({ metricsMode: 'emf' }, { POWERTOOLS_METRICS_DISABLED: 'true' }).metricsMode).toBe('emf')
  })

  it('namespace: METRICS_NAMESPACE, else POWERTOOLS_METRICS_NAMESPACE, else EchoMQ', () => {
    expect(reaperConfig({}, {}).namespace).toBe('EchoMQ')
    expect(reaperConfig({}, { POWERTOOLS_METRICS_NAMESPACE: 'Team/Q' }).namespace).toBe('Team/Q')
    expect(reaperConfig({}, { POWERTOOLS_METRICS_NAMESPACE: 'Team/Q', METRICS_NAMESPACE: 'EchoMQ/prod' }).namespace).toBe('EchoMQ/prod')
  })

  it('per-queue metrics off by default; POWERTOOLS_SERVICE_NAME is kept as the service', () => {
    expect(reaperConfig({}, {})).toMatchObject({ perQueueMetrics: false, service: undefined })
    expect(reaperConfig({}, { PER_QUEUE_METRICS: 'true', POWERTOOLS_SERVICE_NAME: 'billing' })).toMatchObject({
      perQueueMetrics: true,
      service: 'billing',
    })
  })

  it.each([
    [{ PER_QUEUE_METRICS: 'maybe' }, /^PER_QUEUE_METRICS: expected one of true, false, got: "maybe"/],
    [{ POWERTOOLS_METRICS_DISABLED: 'maybe' }, /^POWERTOOLS_METRICS_DISABLED: expected one of true, 1/],
    [{ POWERTOOLS_METRICS_NAMESPACE: 'AWS/Lambda' }, /^POWERTOOLS_METRICS_NAMESPACE: expected a CloudWatch namespace/],
    [{ POWERTOOLS_SERVICE_NAME: 'x'.repeat(256) }, /^POWERTOOLS_SERVICE_NAME: expected a service name of at most 255/],
    [{ REDIS_URL_PARAMETER: 'not a name' }, /^REDIS_URL_PARAMETER: expected an SSM parameter name/],
  ])('rejects %j with ERR_CONFIG naming the variable', (env, message) => {
    const err = (() => {
      try {
        reaperConfig({}, env)
      } catch (e) {
        return e
      }
    })()
    expect(err).toBeInstanceOf(EchoMQError)
    expect((err as EchoMQError).code).toBe('ERR_CONFIG')
    expect((err as Error).message).toMatch(message)
  })
})

describe('loadReaperConfig', () => {
  it('checks every other setting before it reads SSM', async () => {
    await expect(loadReaperConfig({}, { REDIS_URL_PARAMETER: '/x', SWEEP_LIMIT: '0' }, noSecret)).rejects.toMatchObject({
      code: 'ERR_CONFIG',
      message: expect.stringMatching(/^SWEEP_LIMIT/),
    })
  })

  it('with REDIS_URL or an explicit URL it reads no secret', async () => {
    expect((await loadReaperConfig({}, { REDIS_URL: 'redis://h:1', REDIS_URL_PARAMETER: '/x' }, noSecret)).redisUrl).toBe('redis://h:1')
    expect((await loadReaperConfig({ redisUrl: 'redis://o:2' }, { REDIS_URL_PARAMETER: '/x' }, noSecret)).redisUrl).toBe('redis://o:2')
  })

  it('names the parameter when its URL names several hosts without cluster mode', async () => {
    await expect(loadReaperConfig({}, { REDIS_URL_PARAMETER: '/x' }, async () => 'redis://u:pw@h1:1,h2:2')).rejects.toMatchObject({
      message: expect.stringMatching(/^SSM parameter \/x: names 2 hosts/),
    })
  })

  it('the synchronous reaperConfig refuses a URL that is only in SSM rather than guessing', () => {
    expect(() => reaperConfig({}, { REDIS_URL_PARAMETER: '/x' })).toThrow(
      /REDIS_URL_PARAMETER: names SSM parameter \/x.*use loadReaperConfig/,
    )
  })
})
