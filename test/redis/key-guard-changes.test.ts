/**
 * The key guard (test/helpers/key-guard.ts) over changing a job and deduplication: every script these
 * features run (updateData, changePriority, moveToDelayed, changeDelay, extendLock, add with a deduplication, and the
 * finish and remove that release an id) touches only keys passed in KEYS, so each works on a Redis Cluster.
 */
import { describe, expect, it } from 'vitest'
import { DelayedError, type Job } from '../../lib/index.js'
import { loadScript, SCRIPT_FILES } from '../../lib/redis/commands.js'
import { GUARD_PROLOGUE, useGuardedQueue } from '../helpers/key-guard.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const { redis, fx } = useGuardedQueue()

const FILES = [
  SCRIPT_FILES.updateData,
  SCRIPT_FILES.changePriority,
  SCRIPT_FILES.moveToDelayed,
  SCRIPT_FILES.changeDelay,
  SCRIPT_FILES.extendLock,
]

/** The guarded source of each file is in Redis's script cache: it ran under the guard. */
async function expectRan(files: string[]): Promise<void> {
  for (const f of files) expect(loadScript(f).lua.startsWith(GUARD_PROLOGUE)).toBe(true)
  expect(await redis.client.script('EXISTS', ...files.map((f) => loadScript(f).sha))).toEqual(files.map(() => 1))
}

describe('changing a job under the guard', () => {
  it('updateData, changePriority, extendLock, then moveToDelayed with DelayedError; the job runs again', async () => {
    const waiting = await fx.queue.add('j', { v: 1 }, { jobId: 'w', priority: 4 })
    await waiting.updateData({ v: 2 })
    await waiting.changePriority({ priority: 1, lifo: true })
    await waiting.changePriority({ priority: 0 })
    await waiting.remove()
    const delayed = await fx.queue.add('j', {}, { jobId: 'd', delay: 3_600_000 })
    await delayed.changeDelay(1_000)
    await delayed.remove()

    let runs = 0
    const w = fx.worker(async (job: Job) => {
      runs++
      if (runs > 1) return 'again'
      await job.updateData({ step: 1 })
      expect(await job.extendLock(job.token as string, 5_000)).toBe(1)
      await job.moveToDelayed(Date.now() + 200, job.token)
      throw new DelayedError()
    })
    const completed = nextEvent<[Job, unknown]>(w, 'completed')
    await fx.queue.add('j', { step: 0 }, { jobId: 'm' })
    const [job, result] = await completed
    expect(job.id).toBe('m')
    expect(result).toBe('again')
    expect((await fx.queue.getJob('m'))?.data).toEqual({ step: 1 })
    await expectRan(FILES)
  })
})

describe('deduplication under the guard', () => {
  it('adds with and without a ttl, replace of a delayed holder, addBulk, release by finish, failure and removal', async () => {
    const a = await fx.queue.add('j', {}, { deduplication: { id: 'plain' } })
    expect((await fx.queue.add('j', {}, { deduplication: { id: 'plain' } })).id).toBe(a.id)
    const t = await fx.queue.add('j', {}, { deduplication: { id: 'ttl', ttl: 60_000 }, delay: 60_000 })
    expect((await fx.queue.add('j', {}, { deduplication: { id: 'ttl', ttl: 60_000, extend: true } })).id).toBe(t.id)
    const r = await fx.queue.add('j', {}, { deduplication: { id: 'ttl', ttl: 60_000, replace: true }, delay: 60_000 })
    expect(r.id).not.toBe(t.id)
    const bulk = await fx.queue.addBulk([
      { name: 'j', data: {}, opts: { deduplication: { id: 'plain' } } },
      { name: 'j', data: {}, opts: { deduplication: { id: 'b' } } },
      { name: 'j', data: {} },
    ])
    expect(bulk[0]?.id).toBe(a.id)
    const removed = await fx.queue.add('j', {}, { deduplication: { id: 'rm' }, delay: 60_000 })
    expect(await removed.removeDeduplicationKey()).toBe(true)
    await removed.remove()
    expect(await fx.queue.getDeduplicationJobId('rm')).toBeNull()

    const failing = await fx.queue.add('j', { fail: true }, { deduplication: { id: 'f' }, attempts: 1 })
    const w = fx.worker((job: Job) => {
      if ((job.data as { fail?: boolean }).fail) throw new Error('no')
    })
    await waitFor(async () => (await fx.queue.getJob(failing.id))?.state === 'failed', { what: 'the failure' })
    await waitFor(async () => (await fx.queue.getJob(a.id))?.state === 'completed', { what: 'the completion' })
    expect(await fx.queue.getDeduplicationJobId('plain')).toBeNull()
    expect(await fx.queue.getDeduplicationJobId('f')).toBeNull()
    expect(await redis.client.hkeys(fx.keys.meta)).not.toContain('de:plain')
    await w.close()
    await expectRan([SCRIPT_FILES.add, SCRIPT_FILES.finish, SCRIPT_FILES.remove, SCRIPT_FILES.unhold])
  })
})
