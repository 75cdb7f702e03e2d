/**
 * BullMQ's `autorun: false` and `worker.run()` (tests/worker.test.ts and delay.test.ts make most of their
 * workers that way), run on both libraries: a worker made so takes nothing until run(), which resolves once
 * the worker has closed; a second run() is refused with BullMQ's words; run() after close() starts nothing.
 */
import type { Job } from 'bullmq'
import { describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'
import { first, LIBRARIES, usePort } from './adapter.js'

const redis = useRedis()

describe.each(LIBRARIES)('%s: autorun false and worker.run()', (name) => {
  const t = usePort(redis, name)

  it('takes no job before run(), then runs them; run() resolves once the worker closed', async () => {
    await t.queue.add('test', { n: 1 })
    const done = first<Job>()
    const worker = t.worker(async (job) => job.data.n, { autorun: false })
    worker.on('completed', done.listener)
    await worker.waitUntilReady()
    // A round trip after the worker's connection is up: a worker that took jobs on its own would have by now
    // on neither library, so the job's state is what shows it (with isRunning).
    expect(worker.isRunning()).toBe(false)
    expect(await t.queue.getJobCounts('wait', 'active')).toEqual({ wait: 1, active: 0 })

    let returned = false
    const running = worker.run().then(() => {
      returned = true
    })
    expect(worker.isRunning()).toBe(true)
    expect((await done.value).returnvalue).toBe(1)
    expect(returned).toBe(false)
    await worker.close()
    await running
    expect(returned).toBe(true)
    expect(worker.isRunning()).toBe(false)
  })

  it('a second run() is refused: Worker is already running.', async () => {
    const worker = t.worker(() => undefined, { autorun: false })
    const running = worker.run()
    await expect(worker.run()).rejects.toThrow('Worker is already running.')
    await worker.close()
    await running
  })

  it('run() on a worker that runs from its construction is refused', async () => {
    const worker = t.worker(() => undefined)
    await expect(worker.run()).rejects.toThrow('Worker is already running.')
  })

  it('run() after close() starts nothing and resolves', async () => {
    await t.queue.add('test', {})
    const worker = t.worker(() => undefined, { autorun: false })
    await worker.close()
    await worker.run()
    expect(worker.isRunning()).toBe(false)
    expect(await t.queue.getJobCounts('wait', 'active')).toEqual({ wait: 1, active: 0 })
  })
})
