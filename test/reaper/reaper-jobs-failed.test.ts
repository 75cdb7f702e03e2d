/**
 * JobsFailed publishes each failed job once (issue 25, lib/reaper/failures.ts), against real Redis with
 * the metrics caught at a local CloudWatch endpoint by the real SDK client: invocations that overlap
 * (handlers of separate containers run at once, each holding its publish until all of them publish), a
 * publish that fails and the next that succeeds, an invocation killed between its claim and its
 * settlement, and sweeps that do not publish (`echomq sweep` with metrics off, the library's sweep())
 * leaving the count to the reaper that publishes. The claim scripts' branches: reaper-claims.test.ts.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { createServer, type Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { sweep } from '../../lib/index.js'
import { METRIC_NAMES } from '../../lib/reaper/metrics.js'
import { failedCount } from '../helpers/failed-count.js'
import { useQueues } from '../helpers/fixture.js'
import { listenLocally } from '../helpers/local-aws.js'
import { failJobs } from '../helpers/queue-state.js'
import { useReaperInvocations } from '../helpers/reaper-invocations.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const queues = useQueues(redis)
const { open, worker } = queues
const reaper = useReaperInvocations(redis, { env: { METRICS_NAMESPACE: 'EchoMQ/test' } })
const { invoke } = reaper

/** JobsFailed (the total, no dimension) of every request the endpoint received. */
const published = () =>
  reaper.endpoint.requests.map((r) => r.body.MetricData.find((d) => d.MetricName === METRIC_NAMES.JobsFailed && !d.Dimensions)?.Value ?? 0)
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0)

describe('overlapping invocations', () => {
  it('four invocations, all between their count and their publish at once: 2 failures are published as 2', async () => {
    await failJobs(queues, 'emails', 2)
    reaper.endpoint.holdUntil(4)

    const summaries = await Promise.all([invoke(), invoke(), invoke(), invoke()])

    expect(summaries).toHaveLength(4)
    expect(reaper.endpoint.requests).toHaveLength(4)
    expect(sum(published())).toBe(2)
    expect(published().filter((v) => v > 0)).toEqual([2])
    expect(await failedCount(redis.client, 'emails')).toEqual({})
    await invoke()
    expect(published().at(-1)).toBe(0)
  })

  it('jobs failing while three containers invoke back to back: every failure published exactly once', async () => {
    const queue = open('emails')
    const failing = worker('emails', () => Promise.reject(new Error('boom')), { concurrency: 2 })
    const ROUNDS = 6
    const CONTAINERS = 3
    try {
      await Promise.all(
        Array.from({ length: CONTAINERS }, async (_, c) => {
          for (let round = 0; round < ROUNDS; round++) {
            await queue.add('job', { c, round }, { attempts: 1 })
            await invoke()
          }
        }),
      )
      await waitFor(async () => (await queue.counts()).failed === ROUNDS * CONTAINERS, { what: 'every job failed' })
    } finally {
      await failing.close()
    }
    await invoke()

    expect(reaper.endpoint.requests.length).toBe(ROUNDS * CONTAINERS + 1)
    expect(sum(published())).toBe(ROUNDS * CONTAINERS)
    expect(await failedCount(redis.client, 'emails')).toEqual({})
  })
})

describe('a publish that fails', () => {
  it('CloudWatch failing under two overlapping invocations, then healthy under two more: 3 failures published once', async () => {
    await failJobs(queues, 'emails', 3)
    reaper.endpoint.failWith({ status: 500, type: 'InternalServiceError', message: 'boom' })
    await Promise.all([invoke(), invoke()])
    const afterFailure = await failedCount(redis.client, 'emails')
    const failedLine = reaper.logs.lines.find((l) => l.message === 'queue' && l.failedNotPublished !== undefined)
    reaper.endpoint.failWith(undefined)
    reaper.endpoint.requests.length = 0
    reaper.endpoint.holdUntil(2)

    await Promise.all([invoke(), invoke()])

    // The claim was given back whole: the next invocation claims it at once, no lease to wait out.
    expect(afterFailure).toEqual({ failedNew: '3' })
    expect(failedLine).toMatchObject({ failedNew: 0, failedNotPublished: 3 })
    expect(sum(published())).toBe(3)
    expect(await failedCount(redis.client, 'emails')).toEqual({})
  })
})

describe('an invocation killed between its claim and its settlement', () => {
  it('its claim is left alone while it could live, then taken over: 4 failures published once in all', async () => {
    await failJobs(queues, 'emails', 4)
    // A CloudWatch endpoint that accepts and never answers: the child is killed while its publish waits.
    const sockets: Socket[] = []
    let connected = 0
    const hole = await listenLocally(
      createServer((s) => {
        connected++
        sockets.push(s)
      }),
    )
    let child: ChildProcess | undefined
    try {
      child = spawn(
        process.execPath,
        ['--import', 'tsx', fileURLToPath(new URL('../helpers/reaper-invocation-process.ts', import.meta.url))],
        {
          env: {
            ...process.env,
            ...reaper.env(),
            AWS_ENDPOINT_URL_CLOUDWATCH: `http://127.0.0.1:${hole.port}`,
            AWS_REGION: 'eu-west-1',
            AWS_ACCESS_KEY_ID: 'AKIATEST',
            AWS_SECRET_ACCESS_KEY: 'test',
            // The Lambda's time left: its claim lasts that long, plus FAILED_CLAIM_MARGIN_MS.
            TEST_REMAINING_MS: '3000',
          },
          stdio: 'ignore',
        },
      )
      await waitFor(() => connected > 0, { timeoutMs: 20_000, what: 'the child to publish' })
      const exited = new Promise((resolve) => child?.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    } finally {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      for (const s of sockets) s.destroy()
      await hole.close()
    }
    const claimed = await failedCount(redis.client, 'emails')

    await invoke()
    const whileLive = published()
    await waitFor(
      async () => {
        await invoke()
        return sum(published()) >= 4
      },
      { timeoutMs: 20_000, intervalMs: 200, what: 'a later invocation to take the claim over' },
    )
    await invoke()

    expect(claimed).toMatchObject({ failedClaimed: '4' })
    expect(claimed).not.toHaveProperty('failedNew')
    expect(whileLive).toEqual([0])
    expect(sum(published())).toBe(4)
    expect(published().at(-1)).toBe(0)
    expect(reaper.logs.line(/^took over failed jobs/)).toMatchObject({ queue: 'emails', takenOver: 4 })
    expect(await failedCount(redis.client, 'emails')).toEqual({})
  }, 45_000)
})

describe('a sweep that does not publish leaves the count to the reaper that does', () => {
  it('`echomq sweep` (metrics off) and the library sweep(), then the function: 20 failures published as 20', async () => {
    await failJobs(queues, 'emails', 20)
    const { REDIS_URL: _url, METRICS_MODE: _mode, ...env } = process.env
    const cli = await promisify(execFile)(
      process.execPath,
      [fileURLToPath(new URL('../../bin/echomq.js', import.meta.url)), 'sweep', '--redis-url', redis.url, '--json'],
      { env, timeout: 60_000 },
    )
    const afterCli = await failedCount(redis.client, 'emails')
    await sweep(redis.client, 'emails', { graceMs: 0 })
    const afterLibrary = await failedCount(redis.client, 'emails')

    await invoke()

    expect(JSON.parse(cli.stdout)).toMatchObject({ sweeps: 1, queues: { emails: { failed: 0 } } })
    expect(afterCli).toEqual({ failedNew: '20' })
    expect(afterLibrary).toEqual({ failedNew: '20' })
    expect(published()).toEqual([20])
    expect(await failedCount(redis.client, 'emails')).toEqual({})
  }, 60_000)

  it('a reaper with metrics off neither reads nor claims the count', async () => {
    await failJobs(queues, 'emails', 2)
    await invoke({ METRICS_MODE: 'off' })
    // Nothing it knows of happened to the queue: no line of its own, and the summary counts no failed job.
    expect(reaper.logs.line('queue')).toBeUndefined()
    expect(reaper.logs.line('summary')).toMatchObject({ jobsFailed: 0 })
    expect(reaper.logs.line('summary')).not.toHaveProperty('jobsFailedNotPublished')
    expect(await failedCount(redis.client, 'emails')).toEqual({ failedNew: '2' })
  })
})
