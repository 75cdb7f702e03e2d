/**
 * Replies lost to a dropped connection: the proxy lets a script call reach Redis, holds its reply, then
 * cuts the connection. ioredis reconnects and sends the call again (autoResendUnfulfilledCommands), so
 * every script a worker runs meets its own earlier effect. A take or a finish whose reply is lost must not
 * cost the job a run nor turn the worker's own accepted result into a 'lockLost'.
 */
import { afterEach, beforeEach, expect, it } from 'vitest'
import { type Job, sweep } from '../../lib/index.js'
import { loadScript, preloadScripts, SCRIPT_FILES } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'
import { closeWithin } from './cleanup.js'
import { pause } from './config.js'
import { TcpProxy } from './proxy.js'

const redis = useRedis()
let proxy: TcpProxy
const keys = queueKeys('emq', 'q')
let sweeping = false

beforeEach(async () => {
  // Loaded up front, so workers call them by SHA (the proxy recognises a call by its SHA).
  await preloadScripts(redis.client)
  proxy = await TcpProxy.start(redis.port)
})
// After-hooks run last-registered first: resume the proxy, close the workers, then close the proxy.
afterEach(async () => {
  await proxy.close()
})
const fx = useQueue(redis, {
  workers: { lockDuration: 500, heartbeatInterval: 100, closeTimeout: 200 },
  connection: () => proxy.url,
  onError: () => undefined,
  close: closeWithin,
})
const worker = fx.worker
afterEach(async () => {
  sweeping = false
  proxy.resume()
})

const callsScript = (sha: string) => (chunk: Buffer) => chunk.includes(sha)
const stateOf = async (id: string) => (await redis.client.hget(keys.job(id), 'state')) ?? undefined

/** Sweeps every 100 ms (no grace) until job `id` is completed or failed; returns it. */
async function sweepUntilFinished(id: string) {
  sweeping = true
  void (async () => {
    while (sweeping) {
      await sweep(redis.client, 'q', { graceMs: 0 })
      await pause(100)
    }
  })()
  return waitFor(
    async () => {
      const j = await fx.queue.getJob(id)
      return j && (j.state === 'completed' || j.state === 'failed') ? j : undefined
    },
    { what: `${id} to finish` },
  )
}

it('a take whose reply is lost: the job still runs (it is not left leased to nobody until a sweep charges it a stall)', async () => {
  const runs: string[] = []
  worker(async (job) => {
    runs.push(job.id)
    return 'ran'
  })
  await waitFor(async () => (await redis.client.sismember('emq:queues', 'q')) === 1 && proxy.openConnections >= 2, {
    what: 'the worker to connect',
  })
  proxy.holdRepliesAfter(callsScript(loadScript(SCRIPT_FILES.take).sha))
  await fx.queue.add('job', {}, { jobId: 't', attempts: 1 })
  await waitFor(async () => (await stateOf('t')) === 'active', { what: 'the take to run in Redis' })
  proxy.cut()

  const job = await sweepUntilFinished('t')
  console.log(
    `[chaos] reply-loss take: runs=${runs.length} final=${JSON.stringify({ state: job.state, attemptsMade: job.attemptsMade, attemptsStarted: job.attemptsStarted, failedReason: job.failedReason })}`,
  )
  expect(job).toMatchObject({ state: 'completed', returnValue: 'ran' })
  expect(runs).toEqual(['t'])
})

it("a completion whose reply is lost: the worker reports 'completed', not 'lockLost' for its own accepted result", async () => {
  let release: (() => void) | undefined
  const w = worker((job) => new Promise((resolve) => (release = () => resolve(`done:${job.id}`))))
  const events: string[] = []
  w.on('completed', () => events.push('completed'))
  w.on('lockLost', (_job: Job, err: Error) => events.push(`lockLost: ${err.message}`))
  await fx.queue.add('job', {}, { jobId: 'f' })
  await waitFor(() => release, { what: 'the worker to take the job' })
  proxy.holdRepliesAfter(callsScript(loadScript(SCRIPT_FILES.finish).sha))
  release?.()
  await waitFor(async () => (await stateOf('f')) === 'completed', { what: 'the completion to run in Redis' })
  proxy.cut()

  await waitFor(() => events.length > 0, { what: "the worker's report" })
  console.log(`[chaos] reply-loss finish: events=${JSON.stringify(events)}`)
  expect(await fx.queue.getJob('f')).toMatchObject({ state: 'completed', returnValue: 'done:f', attemptsMade: 1 })
  expect(events).toEqual(['completed'])
})

it('a finish that also took the next job, whose reply is lost: that next job still runs', async () => {
  const runs: string[] = []
  worker(async (job) => {
    runs.push(job.id)
    return `ran:${job.id}`
  })
  // f1 is taken by the loop; its finish peeks [f2, f3]; f2 is taken from that peek, and f2's finish takes f3.
  await fx.queue.add('job', {}, { jobId: 'f1' })
  await fx.queue.add('job', {}, { jobId: 'f2' })
  await fx.queue.add('job', {}, { jobId: 'f3', attempts: 1 })
  proxy.holdRepliesAfter((chunk) => chunk.includes(loadScript(SCRIPT_FILES.finish).sha) && chunk.includes('{q}:f3'))
  await waitFor(async () => (await stateOf('f3')) === 'active' && proxy.holding.size > 0, { what: "f2's finish to take f3 in Redis" })
  proxy.cut()

  const job = await sweepUntilFinished('f3')
  console.log(
    `[chaos] reply-loss finish+take: runs=${JSON.stringify(runs)} f3=${JSON.stringify({ state: job.state, attemptsMade: job.attemptsMade, failedReason: job.failedReason })}`,
  )
  expect(job).toMatchObject({ state: 'completed', returnValue: 'ran:f3' })
  expect(runs.filter((id) => id === 'f3')).toEqual(['f3'])
})
