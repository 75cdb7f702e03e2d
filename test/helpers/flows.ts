/** What the flow tests share: a producer, queues and workers on the test's Redis, closed after each test. */
import { afterEach } from 'vitest'
import { FlowProducer, type Job, Queue, Worker, type WorkerOptions } from '../../lib/index.js'
import type { TestRedis } from './redis-server.js'

export function useFlows(redis: TestRedis) {
  const open: { close(): Promise<unknown> }[] = []
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()))
  })
  const keep = <T extends { close(): Promise<unknown> }>(c: T): T => {
    open.push(c)
    return c
  }
  return {
    producer: () => keep(new FlowProducer({ connection: redis.client })),
    queue: (name: string) => keep(new Queue(name, { connection: redis.client })),
    worker: (name: string, fn: (job: Job, token?: string) => unknown, options: WorkerOptions = {}) =>
      keep(new Worker(name, fn, { connection: redis.url, lockDuration: 1_000, ...options })),
  }
}
