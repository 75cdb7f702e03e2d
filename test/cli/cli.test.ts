/** The echomq command, run as a real process: output and exit codes. */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { Job } from '../../lib/index.js'
import { useQueues } from '../helpers/fixture.js'
import { crashedJobs, stalledBefore } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { SSM_REQUEST_ID, type SsmEndpoint, startSsmEndpoint } from '../helpers/ssm-endpoint.js'
import { waitFor } from '../helpers/wait.js'

const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname
const exec = promisify(execFile)

async function echomq(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { REDIS_URL: _ignored, ...base } = process.env
  try {
    const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], { env: { ...base, ...env }, timeout: 60_000 })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

const redis = useRedis()
const { open: openQueue, worker } = useQueues(redis)

/** Adds jobs with one attempt each and lets a real worker named `workerName` fail them (error "<reason> <id>"). */
async function failedJobs(queue: string, ids: string[], { workerName = 'mailer-1', reason = 'smtp refused' } = {}): Promise<void> {
  const q = openQueue(queue)
  for (const id of ids) await q.add('send', { id }, { jobId: id, attempts: 1 })
  const failing = worker(
    queue,
    (job) => {
      throw new Error(`${reason} ${job.id}`)
    },
    { name: workerName },
  )
  try {
    await waitFor(async () => (await q.counts()).failed === ids.length, { what: `${ids.length} failed jobs` })
  } finally {
    await failing.close()
  }
}

/** A real worker named `workerName` holding the next job of `queue` until `release()`. */
async function heldJob(queue: string, workerName: string): Promise<{ release(): Promise<void> }> {
  const q = openQueue(queue)
  let finish: () => void = () => undefined
  const gate = new Promise<void>((resolve) => (finish = resolve))
  const holder = worker(queue, () => gate, { name: workerName })
  await waitFor(async () => (await q.counts()).active === 1, { what: 'a job in flight' })
  return {
    async release() {
      finish()
      await holder.close()
    },
  }
}

const getJob = (queue: string, id: string) => openQueue(queue).getJob(id)

describe('echomq demo', () => {
  it('plays the scene: killed worker\u2019s jobs recovered, paused worker\u2019s left alone, a second stall failed', async () => {
    const { code, stdout } = await echomq(['demo', '--json', '--jobs', '2', '--lease', '600', '--redis-url', redis.url])
    expect(code).toBe(0)
    const { jobs } = JSON.parse(stdout) as { jobs: { id: string; worker: string; sweep1: string; sweep2: string; stalls: number }[] }
    const killed = jobs.filter((j) => j.worker === 'killed')
    const paused = jobs.filter((j) => j.worker === 'paused')
    const healthy = jobs.filter((j) => j.worker === 'healthy')
    expect([killed.length, paused.length, healthy.length]).toEqual([3, 2, 2])
    expect(killed.map((j) => j.sweep1 === 'marked' && j.stalls).sort()).toEqual([1, 1, 2])
    expect(killed.map((j) => j.sweep2).sort()).toEqual(['failed', 'recovered', 'recovered'])
    expect(paused.every((j) => j.sweep1 === 'marked' && j.sweep2 === 'left alone' && j.stalls === 0)).toBe(true)
    expect(healthy.every((j) => j.sweep1 === 'left alone' && j.sweep2 === 'left alone')).toBe(true)
    expect(await redis.client.keys('emq-demo-*')).toEqual([]) // cleans up a Redis it did not start
  })

  it('starts its own redis-server when no Redis is configured, and prints the readouts', async () => {
    const { code, stdout } = await echomq(['demo', '--kill', 'w3', '--pause', 'none', '--jobs', '1', '--lease', '500'])
    expect(code).toBe(0)
    expect(stdout).toMatch(/Started a private redis-server at redis:\/\/127\.0\.0\.1:\d+/)
    expect(stdout).toMatch(/sweep 1\njob +worker +lease +verdict +attempts +stalls/)
    expect(stdout).toMatch(/job-3 +w3 \(killed\) +lapsed +marked/)
    expect(stdout).toMatch(/job-1 +w1 \(healthy\) +alive, \d+ ms left +left alone/)
    expect(stdout).toMatch(/counts: wait \d+, active \d+, stalled 0, completed \d+, failed 1/)
  })

  it('says how to install redis-server when none is on PATH and no Redis is configured', async () => {
    const { code, stderr } = await echomq(['demo'], { PATH: '/nonexistent' })
    expect(code).toBe(1)
    expect(stderr).toMatch(/redis-server is not on PATH\. Install it .*apt-get install redis-server.* or set REDIS_URL/)
  })

  it.each([[['--kill', 'w9']], [['--kill', 'w1', '--pause', 'w1']], [['--jobs', '0']], [['--lease', '50']], [['--bogus']]])(
    'rejects %j with exit code 2',
    async (args) => {
      const { code, stderr } = await echomq(['demo', ...args, '--redis-url', redis.url])
      expect(code).toBe(2)
      expect(stderr).toMatch(/echomq demo: .+/)
    },
  )
})

describe('echomq race', () => {
  it('the atomic side recovers each job exactly once; the app-side checkers do not', async () => {
    const { code, stdout } = await echomq(['race', '--jobs', '150', '--sweepers', '6', '--json', '--redis-url', redis.url])
    expect(code).toBe(0)
    const report = JSON.parse(stdout) as Record<'appSide' | 'atomic', Record<string, number>>
    expect(report.atomic).toEqual({ stalled: 150, recoveries: 150, duplicates: 0, waitDuplicates: 0, attemptsWrong: 0 })
    expect(report.appSide?.stalled).toBe(150)
    expect(report.appSide?.recoveries).toBeGreaterThan(150)
    expect(report.appSide?.duplicates).toBe((report.appSide?.recoveries ?? 0) - 150)
    expect(await redis.client.keys('emq-race-*')).toEqual([])
  })

  it('prints the side-by-side table', async () => {
    const { code, stdout } = await echomq(['race', '--jobs', '50', '--sweepers', '3', '--redis-url', redis.url])
    expect(code).toBe(0)
    expect(stdout).toMatch(/app-side checkers \(unsafe\) +atomic sweep/)
    expect(stdout).toMatch(/jobs stalled +50 +50/)
    expect(stdout).toMatch(/duplicate entries in wait +\d+ +0/)
  })

  it('rejects a bad size with exit code 2', async () => {
    expect((await echomq(['race', '--sweepers', 'many', '--redis-url', redis.url])).code).toBe(2)
  })
})

describe('echomq sweep, stats, inspect', () => {
  it('sweep marks, then recovers, through the Lambda handler\u2019s code path', async () => {
    await crashedJobs(redis.client, 'emails', 2)
    const first = await echomq(['sweep', '--grace', '0', '--json', '--redis-url', redis.url])
    const second = await echomq(['sweep', '--grace', '0', '--queue', 'emails', '--redis-url', redis.url])
    expect(first.code).toBe(0)
    expect(JSON.parse(first.stdout)).toEqual({ sweeps: 1, queues: { emails: { marked: 2, recovered: 0, failed: 0 } } })
    expect(second.code).toBe(0)
    expect(second.stdout).toMatch(/emails +0 +2 +0/)
  })

  it('sweep --every runs on an interval (bounded here by --times)', async () => {
    await crashedJobs(redis.client, 'emails', 1)
    const { code, stdout } = await echomq(['sweep', '--every', '50ms', '--times', '2', '--grace', '0', '--json', '--redis-url', redis.url])
    expect(code).toBe(0)
    const runs = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { queues: Record<string, { marked: number; recovered: number }> })
    expect(runs.map((r) => [r.queues.emails?.marked, r.queues.emails?.recovered])).toEqual([
      [1, 0],
      [0, 1],
    ])
  })

  it('sweep exits 1 when a queue fails, and 1 when Redis is unreachable', async () => {
    openQueue('broken')
    await redis.client.set('emq:{broken}:active', 'x')
    const broken = await echomq(['sweep', '--queue', 'broken', '--redis-url', redis.url])
    expect(broken.code).toBe(1)
    expect(broken.stdout).toMatch(/broken .*wrong Redis type/)
    const dead = await echomq(['sweep', '--redis-url', 'redis://127.0.0.1:1'], { REDIS_TIMEOUT_MS: '300' })
    expect(dead.code).toBe(1)
    expect(dead.stderr).toMatch(/unreachable/)
  })

  it('stats prints counts per registered queue', async () => {
    const q = openQueue('emails')
    await q.add('x', {}, { jobId: 'a' })
    await q.add('x', {}, { jobId: 'b' })
    await crashedJobs(redis.client, 'sms', 1)
    const human = await echomq(['stats', '--redis-url', redis.url])
    const json = await echomq(['stats', '--json', '--queue', 'emails', '--redis-url', redis.url])
    expect(human.code).toBe(0)
    expect(human.stdout).toMatch(/queue +wait +prioritized +delayed +active +stalled +completed +failed/)
    expect(human.stdout).toMatch(/emails +2 +0 +0 +0 +0 +0 +0/)
    expect(human.stdout).toMatch(/sms +0 +0 +0 +1 +0 +0 +0/)
    expect(JSON.parse(json.stdout)).toEqual({
      emails: { wait: 2, prioritized: 0, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 0, paused: false },
    })
  })

  it('schedulers lists the job schedulers with their next run', async () => {
    const q = openQueue('emails')
    await q.upsertJobScheduler('digest', { pattern: '0 0 8 * * *', tz: 'Europe/Paris' }, { name: 'send-digest' })
    await q.upsertJobScheduler('poll', { every: 60_000, limit: 10 })
    const human = await echomq(['schedulers', 'emails', '--redis-url', redis.url])
    const json = await echomq(['schedulers', 'emails', '--json', '--redis-url', redis.url])
    expect(human.code).toBe(0)
    expect(human.stdout).toMatch(/poll +poll +every 60000 ms +\S+ \(in \d+ s\) +1\/10/)
    expect(human.stdout).toMatch(/digest +send-digest +0 0 8 \* \* \* \(Europe\/Paris\)/)
    expect(JSON.parse(json.stdout).map((s: { key: string }) => s.key)).toEqual(['poll', 'digest'])
    expect((await echomq(['schedulers', 'nosuch', '--redis-url', redis.url])).code).toBe(1)
  })

  it("schedulers says how long ago a next run fell due that no sweep has made yet, by Redis's clock", async () => {
    const q = openQueue('emails')
    await q.upsertJobScheduler('late', { every: 60_000 })
    // No sweep for a while: its next period fell due 54 s ago (by Redis's clock, whatever this host's says).
    const [seconds, micros] = await redis.client.time()
    await redis.client.zadd('emq:{emails}:schedulers', Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - 54_000, 'late')
    const human = await echomq(['schedulers', 'emails', '--redis-url', redis.url])
    const ago = Number(/late +late +every 60000 ms +\S+ \((\d+) s ago\) +1/.exec(human.stdout)?.[1])
    // 54 s, plus the time the command took to start.
    expect(ago).toBeGreaterThanOrEqual(54)
    expect(ago).toBeLessThan(54 + 30)
    await q.close()
  })

  it('pause and resume a queue; stats shows it paused', async () => {
    const q = openQueue('emails')
    await q.add('x', {})
    const paused = await echomq(['pause', 'emails', '--redis-url', redis.url])
    const shown = await echomq(['stats', '--redis-url', redis.url])
    expect(paused).toMatchObject({ code: 0, stdout: 'queue emails paused\n' })
    expect(await q.isPaused()).toBe(true)
    expect(shown.stdout).toMatch(/emails \(paused\) +1 /)
    const resumed = await echomq(['resume', 'emails', '--json', '--redis-url', redis.url])
    expect(JSON.parse(resumed.stdout)).toEqual({ queue: 'emails', paused: false })
    expect(await q.isPaused()).toBe(false)
    const unknown = await echomq(['pause', 'emials', '--redis-url', redis.url])
    expect(unknown.code).toBe(1)
    expect((await echomq(['pause', '--redis-url', redis.url])).code).toBe(2)
  })

  it('takes the common options before the command too; a named queue that does not exist exits 1, as for inspect', async () => {
    await openQueue('emails').add('x', {})
    const before = await echomq(['--redis-url', redis.url, '--json', 'stats', '--queue', 'emails'])
    const unknown = await echomq(['stats', '--queue', 'emials', '--redis-url', redis.url])
    expect(before.code).toBe(0)
    expect(JSON.parse(before.stdout)).toMatchObject({ emails: { wait: 1 } })
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/no queue "emials" under prefix "emq"/)
  })

  it('inspect shows in-flight leases, marks and attempts, and failed jobs with their reasons', async () => {
    await stalledBefore(redis.client, 'emails', await crashedJobs(redis.client, 'emails', 2, { attempts: 1 }))
    await echomq(['sweep', '--grace', '0', '--queue', 'emails', '--redis-url', redis.url]) // marks j0, j1
    const marked = await echomq(['inspect', 'emails', '--redis-url', redis.url])
    await echomq(['sweep', '--grace', '0', '--queue', 'emails', '--redis-url', redis.url]) // fails them
    const failed = await echomq(['inspect', 'emails', '--json', '--redis-url', redis.url])

    expect(marked.code).toBe(0)
    expect(marked.stdout).toMatch(/j0 +job +dead-worker +lapsed +yes +0\/1/)
    const report = JSON.parse(failed.stdout) as { inFlight: unknown[]; failed: { id: string; failedReason: string; workerName: string }[] }
    expect(report.inFlight).toEqual([])
    expect(report.failed.map((j) => j.id).sort()).toEqual(['j0', 'j1'])
    expect(report.failed[0]?.failedReason).toBe('job stalled more than allowable limit')
    expect(report.failed[0]?.workerName).toBe('dead-worker')
  })

  it.each([
    [['inspect']],
    [['inspect', 'a b']],
    [['inspect', 'q', 'extra']],
    [['stats', '--queue', 'a{b}']],
    [['stats', '--redis-url', 'http://x']],
    [['sweep', '--every', 'soon']],
    [['sweep', '--metrics', 'loud']],
    [['stats', '--prefix', 'a{b']],
    [['inspect', 'q', '--limit', '0']],
    [['nope']],
    [[]],
  ])('rejects %j with exit code 2', async (args) => {
    const { code, stderr, stdout } = await echomq(args, { REDIS_URL: redis.url })
    expect(code).toBe(2)
    expect(stderr + stdout).toMatch(/echomq/)
  })
})

describe('echomq stats and inspect: delayed jobs and worker names', () => {
  it('stats shows delayed jobs in their own column', async () => {
    const q = openQueue('emails')
    await q.add('later', {}, { jobId: 'd1', delay: 60_000 })
    await q.add('later', {}, { jobId: 'd2', delay: 60_000 })
    await q.add('now', {}, { jobId: 'w1' })
    const human = await echomq(['stats', '--redis-url', redis.url])
    const json = await echomq(['stats', '--json', '--redis-url', redis.url])
    expect(human.code).toBe(0)
    expect(human.stdout).toMatch(/emails +1 +0 +2 +0 +0 +0 +0/)
    expect(JSON.parse(json.stdout)).toEqual({
      emails: { wait: 1, delayed: 2, prioritized: 0, active: 0, stalled: 0, completed: 0, failed: 0, paused: false },
    })
  })

  it('inspect shows delayed jobs (due in, last error) and the worker of in-flight and failed jobs', async () => {
    await failedJobs('emails', ['f1'], { workerName: 'mailer-1' })
    const q = openQueue('emails')
    await q.add('later', {}, { jobId: 'd1', delay: 60_000 })
    // A retry in backoff: its first attempt failed, the next is due in a minute.
    await q.add('flaky', {}, { jobId: 'r1', attempts: 3, backoff: 60_000 })
    const failing = worker(
      'emails',
      () => {
        throw new Error('timeout talking to smtp')
      },
      { name: 'mailer-2' },
    )
    await waitFor(async () => (await q.counts()).delayed === 2, { what: 'the retry in backoff' })
    await failing.close()
    await q.add('slow', {}, { jobId: 'a1' })
    const held = await heldJob('emails', 'mailer-3')
    try {
      const human = await echomq(['inspect', 'emails', '--redis-url', redis.url])
      const json = await echomq(['inspect', 'emails', '--json', '--redis-url', redis.url])
      expect(human.code).toBe(0)
      expect(human.stdout).toMatch(/emails: wait 0, prioritized 0, delayed 2, active 1, stalled 0, completed 0, failed 1/)
      expect(human.stdout).toMatch(/job +name +worker +lease +marked +attempts\n.*\na1 +slow +mailer-3 +\d+ ms left +no +0\/1/)
      expect(human.stdout).toMatch(/delayed \(earliest due first\)\njob +name +due in +attempts +last error/)
      expect(human.stdout).toMatch(/d1 +later +\d+ ms +0\/1\n/)
      expect(human.stdout).toMatch(/r1 +flaky +\d+ ms +1\/3 +timeout talking to smtp/)
      expect(human.stdout).toMatch(/f1 +send +mailer-1 +1\/1 +smtp refused f1/)
      const report = JSON.parse(json.stdout) as {
        inFlight: { id: string; workerName: string }[]
        delayed: { id: string; dueInMs: number; lastError: string | null }[]
        failed: { id: string; workerName: string }[]
      }
      expect(report.inFlight.map((j) => [j.id, j.workerName])).toEqual([['a1', 'mailer-3']])
      expect(report.delayed.map((j) => [j.id, j.lastError])).toEqual([
        ['d1', null],
        ['r1', 'timeout talking to smtp'],
      ])
      expect(report.delayed.every((j) => j.dueInMs > 50_000 && j.dueInMs <= 60_000)).toBe(true)
      expect(report.failed.map((j) => [j.id, j.workerName])).toEqual([['f1', 'mailer-1']])
    } finally {
      await held.release()
    }
  })
})

describe('echomq jobs', () => {
  it('lists failed jobs with their reasons and worker names, most recent first, a page at a time', async () => {
    await failedJobs('emails', ['a', 'b', 'c'], { workerName: 'mailer-1' })
    const human = await echomq(['jobs', 'emails', '--redis-url', redis.url])
    const page2 = await echomq(['jobs', 'emails', '--limit', '2', '--start', '2', '--redis-url', redis.url])
    const json = await echomq(['jobs', 'emails', '--state', 'failed', '--json', '--redis-url', redis.url])

    expect(human.code).toBe(0)
    expect(human.stdout).toMatch(/job +name +attempts +worker +finished +reason/)
    expect(human.stdout).toMatch(/c +send +1\/1 +mailer-1 +\d{4}-\d\d-\d\dT[\d:.]+Z +smtp refused c\n/)
    expect(human.stdout.indexOf('smtp refused c')).toBeLessThan(human.stdout.indexOf('smtp refused a'))
    expect(human.stdout).toMatch(/failed jobs 1-3 of 3 in queue emails \(most recently finished first\)/)
    expect(page2.stdout).toMatch(/\na +send +1\/1 +mailer-1/)
    expect(page2.stdout).not.toMatch(/\n[bc] +send/)
    const list = JSON.parse(json.stdout) as { total: number; jobs: Job[] }
    expect(list.total).toBe(3)
    expect(list.jobs.map((j) => [j.id, j.state, j.workerName, j.failedReason])).toEqual([
      ['c', 'failed', 'mailer-1', 'smtp refused c'],
      ['b', 'failed', 'mailer-1', 'smtp refused b'],
      ['a', 'failed', 'mailer-1', 'smtp refused a'],
    ])
  })

  it('lists jobs in other states: delayed with the time until due, wait, completed', async () => {
    const q = openQueue('emails')
    await q.add('later', {}, { jobId: 'd1', delay: 60_000 })
    await q.add('now', {}, { jobId: 'w1' })
    const delayed = await echomq(['jobs', 'emails', '--state', 'delayed', '--redis-url', redis.url])
    const wait = await echomq(['jobs', 'emails', '--state', 'wait', '--json', '--redis-url', redis.url])
    const completed = await echomq(['jobs', 'emails', '--state', 'completed', '--redis-url', redis.url])
    expect(delayed.code).toBe(0)
    expect(delayed.stdout).toMatch(/job +name +attempts +worker +due in +last error\n.*\nd1 +later +0\/1 +\d+ ms/)
    expect((JSON.parse(wait.stdout) as { jobs: Job[] }).jobs.map((j) => j.id)).toEqual(['w1'])
    expect(completed.code).toBe(0)
    expect(completed.stdout).toMatch(/^no completed jobs in queue emails$/m)
  })

  it('exits 1 for a queue that is not registered and holds no jobs, and does not register it', async () => {
    await failedJobs('emails', ['a'])
    const { code, stderr } = await echomq(['jobs', 'emials', '--redis-url', redis.url])
    expect(code).toBe(1)
    expect(stderr).toMatch(/no queue "emials" under prefix "emq"/)
    expect(await redis.client.smembers('emq:queues')).toEqual(['emails'])
  })
})

describe('echomq retry', () => {
  it('--id moves a failed job back to wait with a fresh budget, keeping its error as lastError', async () => {
    await failedJobs('emails', ['a', 'b'])
    const { code, stdout } = await echomq(['retry', 'emails', '--id', 'a', '--redis-url', redis.url])
    expect(code).toBe(0)
    expect(stdout).toMatch(/retried 1 job\(s\) of queue emails.*\n {2}a$/m)
    const a = await getJob('emails', 'a')
    expect(a).toMatchObject({ state: 'wait', attemptsMade: 0, lastError: 'smtp refused a', retried: 1, workerName: 'mailer-1' })
    expect(a?.failedReason).toBeUndefined()
    expect((await getJob('emails', 'b'))?.state).toBe('failed')
  })

  it('--id of a job that is not failed exits 1 with the library\u2019s message and changes nothing', async () => {
    await failedJobs('emails', ['a'])
    await openQueue('emails').add('later', {}, { jobId: 'd1', delay: 60_000 })
    const before = [await getJob('emails', 'a'), await getJob('emails', 'd1')]
    const { code, stdout, stderr } = await echomq(['retry', 'emails', '--id', 'a,d1', '--redis-url', redis.url])
    expect(code).toBe(1)
    expect(stdout).toBe('')
    expect(stderr).toMatch(/echomq retry: job d1 of queue emails is (wait|delayed), not failed; nothing was retried/)
    expect([await getJob('emails', 'a'), await getJob('emails', 'd1')]).toEqual(before)
  })

  it('--dry-run changes nothing: --all lists the oldest failed ids first, --id reports each job\u2019s state', async () => {
    await failedJobs('emails', ['a', 'b', 'c'])
    const q = openQueue('emails')
    await q.add('now', {}, { jobId: 'w1' })
    const before = [await q.getJobs('failed'), await q.getJobs('wait')]
    const all = await echomq(['retry', 'emails', '--all', '--dry-run', '--redis-url', redis.url])
    const limited = await echomq(['retry', 'emails', '--all', '--limit', '2', '--dry-run', '--json', '--redis-url', redis.url])
    const byId = await echomq(['retry', 'emails', '--id', 'c', '--id', 'w1,nope', '--dry-run', '--redis-url', redis.url])
    const byIdOk = await echomq(['retry', 'emails', '--id', 'b,c', '--dry-run', '--json', '--redis-url', redis.url])

    expect(all.code).toBe(0)
    expect(all.stdout).toMatch(/dry run, nothing changed: would retry 3 job\(s\) of queue emails \(oldest first\):\n {2}a\n {2}b\n {2}c\n$/)
    expect(JSON.parse(limited.stdout)).toEqual({ queue: 'emails', dryRun: true, retried: ['a', 'b'] })
    expect(byId.code).toBe(1)
    expect(byId.stdout).toMatch(/c +failed +would retry\nw1 +wait +not failed\nnope +no such job/)
    expect(byId.stdout).toMatch(/a real run would retry nothing/)
    expect(byIdOk.code).toBe(0)
    expect(JSON.parse(byIdOk.stdout)).toMatchObject({ dryRun: true, retried: ['b', 'c'] })
    expect([await q.getJobs('failed'), await q.getJobs('wait')]).toEqual(before)
  })

  it('--all moves every failed job (up to --limit, oldest first)', async () => {
    await failedJobs('emails', ['a', 'b', 'c'])
    const limited = await echomq(['retry', 'emails', '--all', '--limit', '1', '--json', '--redis-url', redis.url])
    const rest = await echomq(['retry', 'emails', '--all', '--redis-url', redis.url])
    const none = await echomq(['retry', 'emails', '--all', '--redis-url', redis.url])
    expect(JSON.parse(limited.stdout)).toEqual({ queue: 'emails', dryRun: false, retried: ['a'] })
    expect(rest.code).toBe(0)
    expect(rest.stdout).toMatch(/retried 2 job\(s\) of queue emails.*\n {2}b\n {2}c\n$/)
    expect(none.stdout).toMatch(/no failed jobs to retry in queue emails/)
    const jobs = await Promise.all(['a', 'b', 'c'].map((id) => getJob('emails', id)))
    expect(jobs.map((j) => [j?.state, j?.attemptsMade])).toEqual([
      ['wait', 0],
      ['wait', 0],
      ['wait', 0],
    ])
  })
})

describe('echomq remove', () => {
  it('removes a finished job; a second remove finds no job and exits 1', async () => {
    await failedJobs('emails', ['a'])
    const first = await echomq(['remove', 'emails', 'a', '--redis-url', redis.url])
    const again = await echomq(['remove', 'emails', 'a', '--redis-url', redis.url])
    const json = await echomq(['remove', 'emails', 'a', '--json', '--redis-url', redis.url])
    expect(first.code).toBe(0)
    expect(first.stdout).toMatch(/removed job a from queue emails/)
    expect(await getJob('emails', 'a')).toBeUndefined()
    expect((await openQueue('emails').counts()).failed).toBe(0)
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/echomq remove: no job a in queue emails/)
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout)).toEqual({ queue: 'emails', id: 'a', removed: false })
  })

  it('exits 1 with ERR_JOB_ACTIVE\u2019s message for a job in flight, and leaves it to its worker', async () => {
    await openQueue('emails').add('slow', {}, { jobId: 'a1' })
    const held = await heldJob('emails', 'mailer-3')
    try {
      const { code, stderr } = await echomq(['remove', 'emails', 'a1', '--redis-url', redis.url])
      expect(code).toBe(1)
      expect(stderr).toMatch(/echomq remove: job a1 of queue emails is in flight; it was not removed/)
      expect((await getJob('emails', 'a1'))?.state).toBe('active')
    } finally {
      await held.release()
    }
    await waitFor(async () => (await getJob('emails', 'a1'))?.state === 'completed', { what: 'the held job to complete' })
  })
})

describe('bad usage of jobs, retry, remove', () => {
  it.each([
    [['jobs']],
    [['jobs', 'a b']],
    [['jobs', 'emails', '--state', 'dead']],
    [['jobs', 'emails', '--limit', '0']],
    [['jobs', 'emails', '--limit', '10001']],
    [['jobs', 'emails', '--start', 'x']],
    [['jobs', 'emails', '--start=-1']],
    [['jobs', 'emails', 'extra']],
    [['retry', 'emails']],
    [['retry', 'emails', '--all', '--id', 'a']],
    [['retry', 'emails', '--id', 'a', '--limit', '2']],
    [['retry', 'emails', '--all', '--limit', '0']],
    [['retry', 'emails', '--id', 'a:b']],
    [['retry', 'emails', '--id', ',']],
    [['retry', '--all']],
    [['remove', 'emails']],
    [['remove', 'emails', 'a:b']],
    [['remove', 'emails', 'a', 'b']],
  ])('rejects %j with exit code 2, touching nothing', async (args) => {
    await failedJobs('emails', ['a'])
    const { code, stderr } = await echomq(args, { REDIS_URL: redis.url })
    expect(code).toBe(2)
    expect(stderr).toMatch(new RegExp(`^echomq ${args[0]}: .+\nRun "echomq ${args[0]} --help" for usage.`))
    expect((await getJob('emails', 'a'))?.state).toBe('failed')
  })

  it('exits 1 when Redis is unreachable', async () => {
    const { code, stderr } = await echomq(['retry', 'emails', '--all', '--redis-url', 'redis://127.0.0.1:1'])
    expect(code).toBe(1)
    expect(stderr).toMatch(/unreachable/)
  })
})

describe('the Redis URL from the SSM parameter REDIS_URL_PARAMETER names', () => {
  const PASSWORD = 's3cret-pw'
  const PARAMETER = '/echomq/test/redis-url'
  let ssm: SsmEndpoint
  /** The environment of a host that keeps its Redis URL in SSM: the parameter's name, a local SSM endpoint, made-up credentials. */
  const ssmEnv = (extra: Record<string, string> = {}) => ({
    REDIS_URL_PARAMETER: PARAMETER,
    AWS_ENDPOINT_URL_SSM: ssm.url,
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: 'AKIATEST',
    AWS_SECRET_ACCESS_KEY: 'test',
    ...extra,
  })
  const aclUrl = () => `redis://reaper:${PASSWORD}@127.0.0.1:${redis.port}`

  beforeAll(async () => {
    ssm = await startSsmEndpoint()
  })
  afterAll(async () => {
    await ssm?.close()
  })
  beforeEach(async () => {
    await redis.client.call('ACL', 'SETUSER', 'reaper', 'on', 'resetpass', `>${PASSWORD}`, '~*', '&*', '+@all')
    ssm.requests.length = 0
    ssm.parameters.clear()
    ssm.parameters.set(PARAMETER, { value: `${aclUrl()}\n` })
  })

  it('sweep reads it (decrypted) and sweeps with it; the password appears in no output', async () => {
    await crashedJobs(redis.client, 'emails', 2)
    const first = await echomq(['sweep', '--grace', '0', '--json'], ssmEnv())
    const second = await echomq(['sweep', '--grace', '0', '--queue', 'emails'], ssmEnv())

    expect(first.code).toBe(0)
    expect(JSON.parse(first.stdout)).toEqual({ sweeps: 1, queues: { emails: { marked: 2, recovered: 0, failed: 0 } } })
    expect(second.code).toBe(0)
    expect(second.stdout).toMatch(/emails +0 +2 +0/)
    const read = { target: 'AmazonSSM.GetParameter', body: { Name: PARAMETER, WithDecryption: true } }
    expect(ssm.requests).toEqual([read, read])
    expect([first, second].map((r) => r.stdout + r.stderr).join('\n')).not.toContain(PASSWORD)
  })

  it('the other commands read it too: stats, and race on the Redis it names rather than one of its own', async () => {
    await openQueue('emails').add('x', {}, { jobId: 'a' })
    const stats = await echomq(['stats', '--json'], ssmEnv())
    const race = await echomq(['race', '--jobs', '20', '--sweepers', '2', '--json'], ssmEnv())

    expect(stats.code).toBe(0)
    expect(JSON.parse(stats.stdout)).toMatchObject({ emails: { wait: 1 } })
    expect(race.code).toBe(0)
    expect(JSON.parse(race.stdout)).toMatchObject({ atomic: { stalled: 20, recoveries: 20, duplicates: 0 } })
    expect(ssm.requests).toHaveLength(2)
    expect(await redis.client.keys('emq-race-*')).toEqual([]) // it ran here, and cleaned up
  })

  it('--redis-url, then REDIS_URL, win over it: SSM is not called', async () => {
    const flag = await echomq(['stats', '--redis-url', redis.url], ssmEnv())
    const variable = await echomq(['stats'], ssmEnv({ REDIS_URL: redis.url }))
    expect([flag.code, variable.code]).toEqual([0, 0])
    expect(ssm.requests).toEqual([])
  })

  it('a missing parameter is an error naming it, the request id and the fix, before any Redis call', async () => {
    ssm.parameters.clear()
    await crashedJobs(redis.client, 'emails', 1)
    const sweep = await echomq(['sweep', '--grace', '0'], ssmEnv())
    const stats = await echomq(['stats'], ssmEnv())

    for (const { code, stderr } of [sweep, stats]) {
      expect(code).toBe(2)
      expect(stderr).toContain(`SSM parameter ${PARAMETER}: ParameterNotFound (HTTP 400, request id ${SSM_REQUEST_ID})`)
      expect(stderr).toMatch(/aws ssm put-parameter --type SecureString/)
    }
    expect(sweep.stderr).toMatch(/^echomq sweep: /m)
    expect(await openQueue('emails').counts()).toMatchObject({ active: 1, stalled: 0 })
  })

  it('a value that is not a Redis URL is rejected without being quoted', async () => {
    ssm.parameters.set(PARAMETER, { value: PASSWORD })
    for (const args of [['stats'], ['sweep']]) {
      const { code, stderr } = await echomq(args, ssmEnv())
      expect(code).toBe(2)
      expect(stderr).toMatch(new RegExp(`^echomq ${args[0]}: SSM parameter ${PARAMETER}: expected a redis://`, 'm'))
      expect(stderr).not.toContain(PASSWORD)
    }
  })

  it('a plain String parameter works, with a warning on stderr that it is stored unencrypted', async () => {
    ssm.parameters.set(PARAMETER, { value: aclUrl(), type: 'String' })
    const { code, stderr } = await echomq(['stats'], ssmEnv())
    expect(code).toBe(0)
    expect(stderr).toMatch(/^warn: SSM parameter .* not a SecureString/m)
  })
})

describe('--help', () => {
  it.each([['demo'], ['race'], ['sweep'], ['stats'], ['inspect'], ['jobs'], ['retry'], ['remove'], ['ui']])(
    'echomq %s --help',
    async (command) => {
      const { code, stdout } = await echomq([command, '--help'])
      expect(code).toBe(0)
      expect(stdout).toMatch(new RegExp(`^Usage: echomq ${command}`))
      expect(stdout).toMatch(/--json/)
    },
  )

  it('echomq --help lists the commands', async () => {
    const { code, stdout } = await echomq(['--help'])
    expect(code).toBe(0)
    for (const c of ['demo', 'race', 'sweep', 'stats', 'inspect', 'jobs', 'retry', 'remove', 'ui']) expect(stdout).toContain(`  ${c}`)
  })
})

describe('echomq ui refuses before serving', () => {
  it('another host without --auth, bad flags (exit 2); a queue that does not exist (exit 1)', async () => {
    const url = redis.url
    const open = await echomq(['ui', '--host', '0.0.0.0', '--port', '0', '--redis-url', url])
    expect(open.code).toBe(2)
    expect(open.stderr).toMatch(/refusing to serve the dashboard on 0\.0\.0\.0 without auth/)
    for (const args of [
      ['--port', '99999'],
      ['--port', 'http'],
      ['--auth', 'nocolon'],
      ['--auth', ':pw'],
      ['--grace', '-1'],
      ['--queue', 'bad name'],
    ]) {
      const r = await echomq(['ui', ...args, '--redis-url', url])
      expect([args, r.code]).toEqual([args, 2])
    }
    const auth = await echomq(['ui', '--auth', 'admin'])
    expect(auth.stderr).not.toContain('admin')
    const missing = await echomq(['ui', '--queue', 'typo', '--port', '0', '--redis-url', url])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/no queue "typo"/)
    // Nine processes of the command, each a cold start through tsx: seconds each on a loaded 2-core machine.
  }, 120_000)
})
