/**
 * How the cost bench adds and runs a scenario's jobs on each library: adds with addBulk (or FlowProducer.addBulk
 * for flows), then one Worker at concurrency 50 until every job that should complete has; or, for EchoMQ's
 * 'function' scenario, the worker handler invoked as the reaper invokes it, one invocation after another (a
 * warm container), each with the reaper's default event until the queue is drained.
 */
import { FlowProducer as BullFlowProducer, Queue as BullQueue, Worker as BullWorker } from 'bullmq'
import * as emq from '../lib/index.js'
import { createWorkerHandler } from '../lib/lambda/index.js'
import type { FlowSpec, Scenario } from './cost-scenarios.js'

export type Connection = { host: string; port: number; maxRetriesPerRequest: null }

export const QUEUE = 'cost'

/** The worker function's settings in the function scenario: the stack's defaults (serverless.yml). */
export const FUNCTION_CONCURRENCY = 10
export const JOBS_PER_INVOCATION = 100

/** What a function run adds to the figures: its invocations and the time they took (for GB-seconds). */
export interface FunctionRun {
  invocations: number
  functionMs: number
}

const DEADLINE_MS = 180_000

function finished(n: number, count: () => number): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = performance.now() + DEADLINE_MS
    const tick = () => {
      if (count() >= n) return resolve()
      if (performance.now() > deadline) return reject(new Error(`cost bench: ${count()} of ${n} jobs finished in 180 s`))
      setTimeout(tick, 5)
    }
    tick()
  })
}

interface FlowAdder {
  addBulk(flows: FlowSpec[]): Promise<unknown>
  close(): Promise<void>
}

function emqFlowProducer(connection: Connection): FlowAdder {
  return new emq.FlowProducer({ connection })
}

async function add(
  queue: { addBulk(jobs: never[]): Promise<unknown> },
  flows: () => FlowAdder,
  scenario: Scenario,
  n: number,
): Promise<void> {
  if (scenario.flows) {
    const producer = flows()
    for (const chunk of scenario.flows(n, QUEUE)) await producer.addBulk(chunk)
    await producer.close()
  }
  for (const chunk of scenario.chunks(n)) await queue.addBulk(chunk as never[])
}

export async function runEmq(connection: Connection, scenario: Scenario, n: number): Promise<FunctionRun | undefined> {
  const queue = new emq.Queue(QUEUE, { connection })
  await add(queue, () => emqFlowProducer(connection), scenario, n)
  const expected = scenario.completions?.(n) ?? n
  let run: FunctionRun | undefined
  if (scenario.emqRunner === 'function') run = await runFunction(connection, scenario, expected)
  else {
    let done = 0
    const worker = new emq.Worker(QUEUE, scenario.processor(), { connection, concurrency: 50 })
    worker.on('completed', () => void done++)
    await finished(expected, () => done)
    await worker.close()
  }
  await queue.close()
  return run
}

/** The reaper's event, `{ queue, maxJobs: jobsPerInvocation }`, to one handler, until `expected` jobs completed. */
async function runFunction(connection: Connection, scenario: Scenario, expected: number): Promise<FunctionRun> {
  const handler = createWorkerHandler(QUEUE, scenario.processor(), {
    connection: `redis://${connection.host}:${connection.port}`,
    concurrency: scenario.functionConcurrency ?? FUNCTION_CONCURRENCY,
  })
  const end = performance.now() + DEADLINE_MS
  const context = { getRemainingTimeInMillis: () => end - performance.now() }
  let done = 0
  let invocations = 0
  let functionMs = 0
  try {
    while (done < expected) {
      if (performance.now() > end) throw new Error(`cost bench: ${done} of ${expected} jobs run by the function in 180 s`)
      const result = await handler({ queue: QUEUE, maxJobs: JOBS_PER_INVOCATION }, context)
      invocations++
      functionMs += result.ms
      done += result.completed
    }
  } finally {
    await handler.close()
  }
  return { invocations, functionMs }
}

export async function runBull(connection: Connection, scenario: Scenario, n: number): Promise<undefined> {
  const queue = new BullQueue(QUEUE, { connection })
  await add(queue, () => new BullFlowProducer({ connection }), scenario, n)
  let done = 0
  const worker = new BullWorker(QUEUE, scenario.processor(), { connection, concurrency: 50 })
  worker.on('completed', () => void done++)
  worker.on('error', () => undefined)
  await finished(scenario.completions?.(n) ?? n, () => done)
  await worker.close()
  await queue.close()
  return undefined
}
