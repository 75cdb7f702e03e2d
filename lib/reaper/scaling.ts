/**
 * The reaper starts worker functions (echomq/lambda) when jobs wait: after each sweep pass, for each queue of
 * WORKER_FUNCTIONS (worker-functions.ts), it takes the backlog the queue's probe read in that pass
 * (probe-13.lua: the jobs ready to run, waiting, prioritized, delayed and due, none while paused, and the
 * invocations alive: each enters the queue's `invocations` with a lease, lib/lambda/invocation.ts, so a
 * killed one stops counting), then invokes the function asynchronously (InvocationType Event) just enough
 * times: one invocation per jobsPerInvocation jobs ready, at most maxConcurrency, less those alive. A queue
 * the pass did not sweep (QUEUES or the event listed others, or its sweep failed) costs one call of its own
 * (backlog-5.lua). An empty queue costs no call beyond its sweep, and no invocation.
 *
 * The reaper enters the invocations it starts in `invocations` itself, all of a pass in one call, under the
 * ids it passes in the events (`invocation`), with a lease of STARTING_MS: a cold start takes a second or
 * two, and the next pass must not start another for the same jobs. The function renews that same entry from
 * its start and removes it when it returns, so the count is exact; an invocation that never starts stops
 * counting after STARTING_MS, and those whose Invoke failed leave at once, again in one call.
 * @aws-sdk/client-lambda (an optional peer) is loaded the first time a function is to be started.
 */
import { randomUUID } from 'node:crypto'
import { type Backlog, backlog, invocation } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { queueKeys } from '../redis/keys.js'
import { boundedClientOptions, deadline, describeAwsError } from './aws.js'
import type { Log } from './log.js'
import { SCALING_PEER_DEPENDENCIES, withPeers } from './peers.js'
import type { QueueRun } from './run.js'
import type { WorkerFunctions } from './worker-functions.js'

/** How long an invocation this reaper started counts as alive before the function renews its entry. */
const STARTING_MS = 10_000
/** One Invoke call, retries included (an asynchronous invoke answers in milliseconds). */
const INVOKE_TIMEOUT_MS = 3_000

/** Starts one asynchronous invocation of `fn` with `payload` (JSON). */
export type Invoke = (fn: string, payload: string) => Promise<void>

/** Invoke through the AWS SDK's Lambda client (endpoint, region and credentials from the SDK's settings). */
async function lambdaInvoker(): Promise<Invoke> {
  const { LambdaClient, InvokeCommand } = await withPeers(
    'starting worker functions (WORKER_FUNCTIONS)',
    () => import('@aws-sdk/client-lambda'),
    SCALING_PEER_DEPENDENCIES,
  )
  const client = new LambdaClient(boundedClientOptions(INVOKE_TIMEOUT_MS))
  return async (fn, payload) => {
    await client.send(
      new InvokeCommand({ FunctionName: fn, InvocationType: 'Event', Payload: new TextEncoder().encode(payload) }),
      deadline(INVOKE_TIMEOUT_MS),
    )
  }
}

export interface QueueScaling {
  ready: number
  live: number
  started: number
}

export class WorkerScaler {
  private invoker: Promise<Invoke> | undefined
  /** The queues of WORKER_FUNCTIONS: their probes read the backlog (runReaper's backlogOf). */
  readonly queues: ReadonlySet<string>

  constructor(
    private readonly functions: WorkerFunctions,
    private readonly prefix: string,
    private readonly log: Log,
    private readonly makeInvoker: () => Promise<Invoke> = lambdaInvoker,
  ) {
    this.queues = new Set(Object.keys(functions))
  }

  /**
   * One pass over the configured queues, each with the backlog its sweep read in `runs` (or one call of its
   * own); a queue's failure is logged and does not stop the others.
   */
  async scale(client: RedisClient, runs: Record<string, QueueRun> = {}): Promise<Record<string, QueueScaling>> {
    const out: Record<string, QueueScaling> = {}
    await Promise.all(
      Object.entries(this.functions).map(async ([queue, fn]) => {
        try {
          out[queue] = await this.scaleQueue(client, queue, fn, runs[queue]?.backlog)
        } catch (err) {
          this.log('error', 'could not start worker functions for this queue', { queue, function: fn.function, ...describeAwsError(err) })
        }
      }),
    )
    return out
  }

  private async scaleQueue(client: RedisClient, queue: string, fn: WorkerFunctions[string], read?: Backlog): Promise<QueueScaling> {
    const keys = queueKeys(this.prefix, queue)
    const { ready, live } = read ?? (await backlog(client, keys))
    // The invocations a backlog needs, of which those alive (or started and not yet running) are already there.
    const wanted = Math.min(fn.maxConcurrency, Math.ceil(ready / fn.jobsPerInvocation)) - live
    if (wanted <= 0) return { ready, live, started: 0 }
    this.invoker ??= this.makeInvoker()
    const invoke = await this.invoker.catch((err) => {
      this.invoker = undefined
      throw err
    })
    const ids = Array.from({ length: wanted }, () => randomUUID())
    await invocation(client, keys, 'enter', ids, STARTING_MS)
    const payload = (id: string) => JSON.stringify({ queue, maxJobs: fn.jobsPerInvocation, invocation: id })
    const results = await Promise.allSettled(ids.map((id) => invoke(fn.function, payload(id))))
    const failed = ids.filter((_, i) => results[i]?.status === 'rejected')
    const started = wanted - failed.length
    if (failed.length > 0) {
      await invocation(client, keys, 'leave', failed, 0).catch(() => undefined)
      const failure = results.find((r) => r.status === 'rejected') as PromiseRejectedResult
      this.log('error', 'could not start a worker function', {
        queue,
        function: fn.function,
        failed: failed.length,
        ...describeAwsError(failure.reason),
      })
    }
    return { ready, live, started }
  }
}
