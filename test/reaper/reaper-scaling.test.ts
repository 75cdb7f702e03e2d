/**
 * The reaper starts worker functions (WORKER_FUNCTIONS, lib/reaper/scaling.ts) through the AWS SDK's real Lambda
 * client against a local endpoint (AWS_ENDPOINT_URL_LAMBDA) that counts its Invoke calls: none for an empty
 * or paused queue, one per jobsPerInvocation jobs ready up to maxConcurrency, none with the maximum already
 * alive (invocations tracked in Redis with a lease), and the whole path: invoked functions drain the fx.queue.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createWorkerHandler } from '../../lib/lambda/index.js'
import { reaperConfig } from '../../lib/reaper/config.js'
import { createReaper, type Reaper } from '../../lib/reaper/reaper.js'
import { parseWorkerFunctions } from '../../lib/reaper/worker-functions.js'
import { invocation } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useQueue } from '../helpers/fixture.js'
import { type LambdaEndpoint, startLambdaEndpoint } from '../helpers/lambda-endpoint.js'
import { stubLocalAws } from '../helpers/local-aws.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { name: 'emails' })
let endpoint: LambdaEndpoint
let reaper: Reaper | undefined

const workers = (entry: object) => JSON.stringify({ emails: { function: 'email-worker', ...entry } })

function startReaper(entry: object): Reaper {
  const config = reaperConfig({}, { REDIS_URL: redis.url, METRICS_MODE: 'off', QUEUES: 'emails', WORKER_FUNCTIONS: workers(entry) })
  reaper = createReaper(config, { log: () => undefined })
  return reaper
}

beforeEach(async () => {
  endpoint = await startLambdaEndpoint()
  stubLocalAws({ AWS_ENDPOINT_URL_LAMBDA: endpoint.url })
})
afterEach(async () => {
  await reaper?.close()
  reaper = undefined
  await endpoint.settled()
  await endpoint.close()
  await fx.queue.close()
  vi.unstubAllEnvs()
})

const addJobs = (n: number) => fx.queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'send', data: { i } })))

it('an empty queue costs no invocation', async () => {
  const summary = await startReaper({ maxConcurrency: 3, jobsPerInvocation: 10 }).run()
  expect(endpoint.calls).toEqual([])
  expect(summary.workersStarted).toEqual({ emails: 0 })
})

it('a backlog starts one invocation per jobsPerInvocation jobs ready, asynchronously, up to maxConcurrency', async () => {
  await addJobs(25)
  await fx.queue.add('later', {}, { delay: 60_000 }) // not due: not ready
  const summary = await startReaper({ maxConcurrency: 5, jobsPerInvocation: 10 }).run()
  expect(endpoint.calls).toHaveLength(3)
  for (const call of endpoint.calls) {
    expect(call).toEqual({
      function: 'email-worker',
      invocationType: 'Event',
      payload: { queue: 'emails', maxJobs: 10, invocation: expect.stringMatching(/^[\w-]{36}$/) },
    })
  }
  expect(summary.workersStarted).toEqual({ emails: 3 })
  // Entered by the reaper under the ids it passed, so they count before the functions start.
  const ids = endpoint.calls.map((c) => (c.payload as { invocation: string }).invocation).sort()
  expect((await redis.client.zrange(queueKeys('emq', 'emails').invocations, '0', '-1')).sort()).toEqual(ids)

  // The next run, before those have started: they count as alive, so nothing more is started.
  await reaper?.run()
  expect(endpoint.calls).toHaveLength(3)
})

it('a large backlog starts no more than maxConcurrency; with the maximum alive, none', async () => {
  await addJobs(100)
  await startReaper({ maxConcurrency: 2, jobsPerInvocation: 10 }).run()
  expect(endpoint.calls).toHaveLength(2)
  await reaper?.close()

  const keys = queueKeys('emq', 'emails')
  await invocation(redis.client, keys, 'enter', 'alive-1', 60_000)
  await invocation(redis.client, keys, 'enter', 'alive-2', 60_000)
  await startReaper({ maxConcurrency: 2, jobsPerInvocation: 10 }).run()
  expect(endpoint.calls).toHaveLength(2)
})

it('a paused queue starts nothing', async () => {
  await addJobs(5)
  await fx.queue.pause()
  await startReaper({ maxConcurrency: 2, jobsPerInvocation: 10 }).run()
  expect(endpoint.calls).toEqual([])
})

it('the whole path: the reaper starts worker functions, which drain the queue', async () => {
  const work = createWorkerHandler('emails', async (job) => job.data, { connection: redis.url, concurrency: 4 })
  endpoint.onInvoke((call) => {
    // Time enough for the default jobTimeoutMs (the 30 s lease) and reserveMs.
    const end = performance.now() + 60_000
    return work(call.payload, { getRemainingTimeInMillis: () => end - performance.now() })
  })
  try {
    await addJobs(30)
    await startReaper({ maxConcurrency: 3, jobsPerInvocation: 10 }).run()
    expect(endpoint.calls).toHaveLength(3)
    await waitFor(async () => (await fx.queue.getJobCounts('completed')).completed === 30, {
      what: 'the worker functions to drain the queue',
    })
    await endpoint.settled()
    expect(await redis.client.exists(queueKeys('emq', 'emails').invocations)).toBe(0)
  } finally {
    await work.close()
  }
})

describe('what scaling costs in commands', () => {
  /** Script calls (EVALSHA) over `fn`, from INFO commandstats of the test's own server. */
  async function scriptCalls(fn: () => Promise<unknown>): Promise<number> {
    await redis.client.config('RESETSTAT')
    await fn()
    return Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redis.client.info('commandstats'))?.[1] ?? 0)
  }

  it("a swept queue's backlog comes with its probe; the invocations of a pass enter in one call", async () => {
    await addJobs(25)
    const reaper = startReaper({ maxConcurrency: 5, jobsPerInvocation: 10 })
    await reaper.run() // the scripts loaded, the head of the line known
    await redis.client.del(queueKeys('emq', 'emails').invocations)
    endpoint.calls.length = 0
    // The probe (which reads the backlog and the head's wait), then one call entering the 3 invocations.
    expect(await scriptCalls(() => reaper.run())).toBe(2)
    expect(endpoint.calls).toHaveLength(3)
    expect(await redis.client.zcard(queueKeys('emq', 'emails').invocations)).toBe(3)
  })

  it('a queue of WORKER_FUNCTIONS that the pass did not sweep costs one backlog call of its own', async () => {
    await addJobs(25)
    const config = reaperConfig(
      {},
      {
        REDIS_URL: redis.url,
        METRICS_MODE: 'off',
        QUEUES: 'other',
        WORKER_FUNCTIONS: workers({ maxConcurrency: 5, jobsPerInvocation: 10 }),
      },
    )
    reaper = createReaper(config, { log: () => undefined })
    const summary = await reaper.run()
    expect(summary.workersStarted).toEqual({ emails: 3 })
    expect(endpoint.calls).toHaveLength(3)
  })
})

describe('WORKER_FUNCTIONS is checked with the rest of the configuration', () => {
  it.each([
    ['not JSON', '{emails'],
    ['an array', '[]'],
    ['a bad queue name', JSON.stringify({ 'bad name': { function: 'f', maxConcurrency: 1, jobsPerInvocation: 1 } })],
    ['a bad function', workers({ function: 'no spaces', maxConcurrency: 1, jobsPerInvocation: 1 })],
    ['maxConcurrency 0', workers({ maxConcurrency: 0, jobsPerInvocation: 1 })],
    ['jobsPerInvocation missing', workers({ maxConcurrency: 1 })],
    ['an unknown field', workers({ maxConcurrency: 1, jobsPerInvocation: 1, concurrency: 2 })],
  ])('%s', (_label, value) => {
    expect(() => reaperConfig({}, { REDIS_URL: redis.url, WORKER_FUNCTIONS: value })).toThrow(
      expect.objectContaining({ code: 'ERR_CONFIG', variable: 'WORKER_FUNCTIONS' }),
    )
  })

  it('accepts names, aliases and ARNs; unset means none', () => {
    const arn = 'arn:aws:lambda:eu-west-1:123456789012:function:email-worker:live'
    expect(parseWorkerFunctions(JSON.stringify({ a: { function: arn, maxConcurrency: 3, jobsPerInvocation: 100 } }))).toEqual({
      a: { function: arn, maxConcurrency: 3, jobsPerInvocation: 100 },
    })
    expect(reaperConfig({}, { REDIS_URL: redis.url }).workerFunctions).toBeUndefined()
  })
})
