/**
 * Job ids as BullMQ 6.7 allows them: any text but an integer, ':' only in ids of three parts, '/' and
 * '@' fine, up to 256 characters; and the keys they make stay apart and in the queue's slot.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { EchoMQError, type Job, MAX_JOB_ID_LENGTH } from '../../lib/index.js'
import { QUEUE_KEY_NAMES } from '../../lib/redis/keys.js'
import { useQueue } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { snapshot } from '../helpers/snapshot.js'
import { nextEvent, waitFor } from '../helpers/wait.js'

const redis = useRedis()
const fx = useQueue(redis, { workers: { lockDuration: 1_000, closeTimeout: 500 } })

/** A key's cluster hash tag, by Redis's rule: what is between the first '{' and the first '}' after it. */
function hashTag(key: string): string | undefined {
  const open = key.indexOf('{')
  const close = open < 0 ? -1 : key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : undefined
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p
    return undefined
  } catch (err) {
    expect(err).toBeInstanceOf(EchoMQError)
    return (err as EchoMQError).code
  }
}

describe('ids BullMQ 6.7 accepts', () => {
  it.each(['welcome/ada@example.com', 'acme:invoice:42'])('%s: added, run, read, removed', async (id) => {
    const added = await fx.queue.add('mail', { to: 'ada' }, { jobId: id })
    expect(added.id).toBe(id)
    expect(added.opts.jobId).toBe(id)
    const seen: string[] = []
    const w = fx.worker((job) => {
      seen.push(job.id)
      return `sent ${job.id}`
    })
    const [done] = await nextEvent<[Job]>(w, 'completed')
    expect(done.id).toBe(id)
    expect(seen).toEqual([id])
    const read = await fx.queue.getJob(id)
    expect(read).toMatchObject({ id, state: 'completed', returnValue: `sent ${id}`, data: { to: 'ada' } })
    expect(await fx.queue.getJobState(id)).toBe('completed')
    expect(await fx.queue.remove(id)).toBe(1)
    expect(await fx.queue.getJob(id)).toBeUndefined()
    expect(await redis.client.exists(fx.keys.job(id), fx.keys.lock(id), fx.keys.logs(id))).toBe(0)
  })

  it('an id of the stated length is accepted, one more is refused', async () => {
    const long = `k${'x'.repeat(MAX_JOB_ID_LENGTH - 1)}`
    expect((await fx.queue.add('x', {}, { jobId: long })).id).toBe(long)
    expect(await codeOf(fx.queue.add('x', {}, { jobId: `${long}y` }))).toBe('ERR_JOB_ID')
  })

  it("a job scheduler's id may be as long and hold what a job id holds but ':'; its runs are read back", async () => {
    const sid = `digest/team@example.com ${'x'.repeat(MAX_JOB_ID_LENGTH - 30)}`
    const first = await fx.queue.upsertJobScheduler(sid, { every: 60_000 })
    expect(first?.id).toMatch(/^repeat:/)
    expect((await fx.queue.getJob(first?.id as string))?.repeatJobKey).toBeDefined()
    expect(await codeOf(fx.queue.upsertJobScheduler('a:b', { every: 60_000 }))).toBe('ERR_JOB_ID')
  })

  it('spaces, letters of any script and braces are text like any other; the key keeps the queue slot', async () => {
    for (const id of ['order 42', 'café-ü', '{other}/1', 'a}{b']) {
      expect((await fx.queue.add('x', {}, { jobId: id })).id).toBe(id)
      expect(hashTag(fx.keys.job(id))).toBe('q')
      expect(hashTag(fx.keys.lock(id))).toBe('q')
      expect(hashTag(fx.keys.logs(id))).toBe('q')
    }
  })
})

describe('ids BullMQ 6.7 refuses, and those that would meet another key', () => {
  it.each([
    ['an integer (EchoMQ gives those)', '42'],
    ['a negative integer', '-7'],
    ["one ':' (two parts)", 'tenant:7'],
    ["three ':' (four parts)", 'a:b:c:d'],
    ["'0:' first (BullMQ's Queue.add refuses it)", '0:a:b'],
    ['a job lease: <id>:lock', 'welcome:lock'],
    ['a job log: <id>:logs', 'welcome:logs'],
    ["a three-part job's lease: a:b:c:lock", 'a:b:c:lock'],
    ["a queue key's name", 'meta'],
    ["a queue key's name as first part", 'schedulers:beat:x'],
    ["a scheduler run's form", 'repeat:beat:1700000000000'],
    ['a control character', 'a\nb'],
    ['empty', ''],
  ])('%s is refused (ERR_JOB_ID), nothing written', async (_what, id) => {
    const before = await snapshot(redis.client)
    expect(await codeOf(fx.queue.add('x', {}, { jobId: id }))).toBe('ERR_JOB_ID')
    expect(await snapshot(redis.client)).toEqual(before)
  })

  it("every queue key name is refused, flows' (waiting-children, handoffs, adding) too; the migrating page lists them all", async () => {
    const page = readFileSync(new URL('../../docs/migrating-from-bullmq-queue.md', import.meta.url), 'utf8')
    const paragraph = page.slice(page.indexOf("The queue's key names an id may not take"), page.indexOf('Keys stay apart'))
    const listed = [...paragraph.matchAll(/`([\w-]+)`/g)].map((m) => m[1]).filter((n) => n !== 'QUEUE_KEY_NAMES' && n !== 'ERR_JOB_ID')
    expect(listed.sort()).toEqual([...QUEUE_KEY_NAMES].sort())
    expect(QUEUE_KEY_NAMES).toEqual(expect.arrayContaining(['waiting-children', 'handoffs', 'adding']))
    const before = await snapshot(redis.client)
    for (const id of QUEUE_KEY_NAMES) expect([id, await codeOf(fx.queue.add('x', {}, { jobId: id }))]).toEqual([id, 'ERR_JOB_ID'])
    expect(await snapshot(redis.client)).toEqual(before)
  })

  it("a three-part id ending like a suffix (a:b:lock) is a job of its own: no other job's lease or log is it", async () => {
    // 'a:b' cannot be a job (one ':'), so nothing else's lease is a:b:lock; and its own lease is a:b:lock:lock.
    let release = () => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    const w = fx.worker(
      async (job) => {
        await job.log(`ran ${job.id}`)
        if (job.id === 'x:y:lock') await held
        return job.id
      },
      { concurrency: 3 },
    )
    const completed: string[] = []
    w.on('completed', (job) => completed.push(job.id))
    await fx.queue.add('x', {}, { jobId: 'x:y:lock' })
    await fx.queue.add('x', {}, { jobId: 'x:y:logs' })
    await fx.queue.add('x', {}, { jobId: 'xy' })
    await waitFor(() => completed.length === 2, { what: 'the two jobs not held' })
    expect(await redis.client.type(fx.keys.job('x:y:lock'))).toBe('hash')
    expect(await redis.client.type(fx.keys.lock('x:y:lock'))).toBe('string')
    expect(await redis.client.type(fx.keys.job('x:y:logs'))).toBe('hash')
    expect(await redis.client.lrange(fx.keys.logs('x:y:logs'), 0, -1)).toEqual(['ran x:y:logs'])
    release()
    await waitFor(() => completed.length === 3, { what: 'the held job' })
    expect((await fx.queue.getJobs('completed')).map((j) => j.id).sort()).toEqual(['x:y:lock', 'x:y:logs', 'xy'])
  })
})
