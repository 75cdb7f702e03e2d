/** What the flow tests share: a producer, queues and workers on the test's Redis, closed after each test. */
import { afterEach } from 'vitest'
import { FlowProducer, type Job, type WorkerOptions } from '../../lib/index.js'
import { useQueues } from './fixture.js'
import type { TestRedis } from './redis-server.js'

export function useFlows(redis: TestRedis) {
  // Queues and workers through the fixture (workers closed before queues); producers closed here.
  const queues = useQueues(redis)
  const producers: FlowProducer[] = []
  afterEach(async () => {
    await Promise.all(producers.splice(0).map((p) => p.close()))
  })
  return {
    producer: () => {
      const producer = new FlowProducer({ connection: redis.client })
      producers.push(producer)
      return producer
    },
    queue: (name: string) => queues.open(name),
    worker: (name: string, fn: (job: Job, token?: string) => unknown, options: WorkerOptions = {}) =>
      queues.worker(name, fn, { lockDuration: 1_000, ...options }),
  }
}
