/**
 * What "a queue used the feature once" means in the feature-off bench: each feature's one use on a queue,
 * through its own Queue, Worker, QueueEvents or handler, all closed before the measured workload starts (a
 * queue that used the feature and no longer does).
 */
import * as emq from '../lib/index.js'
import { createWorkerHandler } from '../lib/lambda/index.js'
import { EMQ_PREFIX } from './build.js'
import { until } from './util.js'

export interface UseTarget {
  queue: string
  host: string
  port: number
}

export interface Feature {
  name: string
  /** What the use was, for the report. */
  what: string
  use(t: UseTarget): Promise<void>
}

const connection = (t: UseTarget) => ({ host: t.host, port: t.port, maxRetriesPerRequest: null })
const url = (t: UseTarget) => `redis://${t.host}:${t.port}`

/** Adds the jobs with `add`, runs them with a Worker of `workerOpts` until `count` completed, closes both. */
async function addAndRun(
  t: UseTarget,
  add: (q: emq.Queue) => Promise<unknown>,
  count = 1,
  workerOpts: Partial<emq.WorkerOptions> = {},
  after?: (q: emq.Queue) => Promise<unknown>,
): Promise<void> {
  const queue = new emq.Queue(t.queue, { connection: connection(t), prefix: EMQ_PREFIX })
  let done = 0
  const worker = new emq.Worker(t.queue, async () => 'ok', { connection: connection(t), prefix: EMQ_PREFIX, ...workerOpts })
  worker.on('completed', () => void done++)
  try {
    await add(queue)
    await until(() => done >= count, `${t.queue}: ${count} jobs of the feature's use`, 30_000)
    await after?.(queue)
  } finally {
    await worker.close()
    await queue.close()
  }
}

const plainOne = (q: emq.Queue) => q.add('j', { i: 0 })

/** The A/A row: both queues never used a feature, so its throughput spread is the machine's noise. */
export const CONTROL = 'none (A/A)'

export const FEATURES: Feature[] = [
  { name: CONTROL, what: 'nothing: both queues are plain', use: async () => undefined },
  {
    name: 'deduplication',
    what: 'one add with deduplication: { id }, and a duplicate of it, run',
    use: (t) => addAndRun(t, (q) => q.addBulk([0, 1].map(() => ({ name: 'j', data: {}, opts: { deduplication: { id: 'once' } } })))),
  },
  {
    name: 'keepLastIfActive',
    what: "deduplication's keepLastIfActive: an add while its holder ran kept as the next job, both run",
    use: async (t) => {
      const queue = new emq.Queue(t.queue, { connection: connection(t), prefix: EMQ_PREFIX })
      let release: () => void = () => undefined
      const held = new Promise<void>((resolve) => {
        release = resolve
      })
      let started = 0
      let done = 0
      const worker = new emq.Worker(
        t.queue,
        async () => {
          if (started++ === 0) await held
        },
        { connection: connection(t), prefix: EMQ_PREFIX },
      )
      worker.on('completed', () => void done++)
      const opts = { deduplication: { id: 'last', keepLastIfActive: true } }
      try {
        await queue.add('j', { n: 1 }, opts)
        await until(() => started >= 1, `${t.queue}: the holder running`, 30_000)
        await queue.add('j', { n: 2 }, opts)
        release()
        await until(() => done >= 2, `${t.queue}: the holder and its next job`, 30_000)
      } finally {
        await worker.close()
        await queue.close()
      }
    },
  },
  { name: 'priorities', what: 'one job with priority 5, run', use: (t) => addAndRun(t, (q) => q.add('j', {}, { priority: 5 })) },
  { name: 'delays', what: 'one job delayed 50 ms, run', use: (t) => addAndRun(t, (q) => q.add('j', {}, { delay: 50 })) },
  {
    name: 'globalLimits',
    what: 'setGlobalConcurrency(2) and setGlobalRateLimit(10, 100), two jobs run, both limits removed',
    use: (t) =>
      addAndRun(
        t,
        async (q) => {
          await q.setGlobalConcurrency(2)
          await q.setGlobalRateLimit(10, 100)
          await q.addBulk([0, 1].map((i) => ({ name: 'j', data: { i } })))
        },
        2,
        {},
        async (q) => {
          await q.removeGlobalConcurrency()
          await q.removeGlobalRateLimit()
        },
      ),
  },
  {
    name: 'schedulers',
    what: 'a scheduler every 200 ms, two runs, then removed',
    use: (t) =>
      addAndRun(
        t,
        (q) => q.upsertJobScheduler('s', { every: 200 }, { name: 'tick', data: {} }),
        2,
        {},
        (q) => q.removeJobScheduler('s'),
      ),
  },
  {
    name: 'rateLimit',
    what: 'a worker with limiter { max: 2, duration: 200 } ran 4 jobs',
    use: (t) =>
      addAndRun(t, (q) => q.addBulk([0, 1, 2, 3].map((i) => ({ name: 'j', data: { i } }))), 4, { limiter: { max: 2, duration: 200 } }),
  },
  {
    name: 'events',
    what: 'a QueueEvents saw one job complete, then closed',
    use: async (t) => {
      const events = new emq.QueueEvents(t.queue, { connection: connection(t), prefix: EMQ_PREFIX })
      let seen = 0
      events.on('completed', () => void seen++)
      try {
        await events.waitUntilReady()
        await addAndRun(t, plainOne)
        await until(() => seen >= 1, `${t.queue}: the completed event`, 30_000)
      } finally {
        await events.close()
      }
    },
  },
  {
    name: 'workerFunctions',
    what: 'one worker-handler invocation ran one job',
    use: async (t) => {
      const queue = new emq.Queue(t.queue, { connection: connection(t), prefix: EMQ_PREFIX })
      const handler = createWorkerHandler(t.queue, async () => 'ok', { connection: url(t), prefix: EMQ_PREFIX })
      const end = performance.now() + 60_000
      try {
        await plainOne(queue)
        const result = await handler({ queue: t.queue }, { getRemainingTimeInMillis: () => end - performance.now() })
        if (result.completed !== 1) throw new Error(`feature-off: the invocation completed ${result.completed} jobs, not 1`)
      } finally {
        await handler.close()
        await queue.close()
      }
    },
  },
  {
    name: 'flows',
    what: 'one flow (a parent and a child), run',
    use: async (t) => {
      const producer = new emq.FlowProducer({ connection: connection(t), prefix: EMQ_PREFIX })
      try {
        const flow = {
          name: 'parent',
          queueName: t.queue,
          data: {},
          prefix: EMQ_PREFIX,
          children: [{ name: 'child', queueName: t.queue, data: {} }],
        }
        await addAndRun(t, () => producer.add(flow), 2)
      } finally {
        await producer.close()
      }
    },
  },
]
