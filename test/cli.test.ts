/** The echomq command, run as a real process: output and exit codes. */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { Queue } from '../lib/index.js'
import { crashedJobs } from './helpers/queue-state.js'
import { useRedis } from './helpers/redis-server.js'

const BIN = new URL('../bin/echomq.js', import.meta.url).pathname
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

describe('echomq demo', () => {
  it('plays the scene: killed worker\u2019s jobs recovered, paused worker\u2019s left alone, last attempt failed', async () => {
    const { code, stdout } = await echomq(['demo', '--json', '--jobs', '2', '--lease', '600', '--redis-url', redis.url])
    expect(code).toBe(0)
    const { jobs } = JSON.parse(stdout) as { jobs: { id: string; worker: string; sweep1: string; sweep2: string; attemptsMade: number }[] }
    const killed = jobs.filter((j) => j.worker === 'killed')
    const paused = jobs.filter((j) => j.worker === 'paused')
    const healthy = jobs.filter((j) => j.worker === 'healthy')
    expect([killed.length, paused.length, healthy.length]).toEqual([3, 2, 2])
    expect(killed.every((j) => j.sweep1 === 'marked' && j.attemptsMade === 1)).toBe(true)
    expect(killed.map((j) => j.sweep2).sort()).toEqual(['failed', 'recovered', 'recovered'])
    expect(paused.every((j) => j.sweep1 === 'marked' && j.sweep2 === 'left alone' && j.attemptsMade === 0)).toBe(true)
    expect(healthy.every((j) => j.sweep1 === 'left alone' && j.sweep2 === 'left alone')).toBe(true)
    expect(await redis.client.keys('emq-demo-*')).toEqual([]) // cleans up a Redis it did not start
  })

  it('starts its own redis-server when no Redis is configured, and prints the readouts', async () => {
    const { code, stdout } = await echomq(['demo', '--kill', 'w3', '--pause', 'none', '--jobs', '1', '--lease', '500'])
    expect(code).toBe(0)
    expect(stdout).toMatch(/Started a private redis-server at redis:\/\/127\.0\.0\.1:\d+/)
    expect(stdout).toMatch(/sweep 1\njob +worker +lease +verdict +attempts/)
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
    new Queue('broken', { connection: redis.client })
    await redis.client.set('emq:{broken}:active', 'x')
    const broken = await echomq(['sweep', '--queue', 'broken', '--redis-url', redis.url])
    expect(broken.code).toBe(1)
    expect(broken.stdout).toMatch(/broken .*wrong Redis type/)
    const dead = await echomq(['sweep', '--redis-url', 'redis://127.0.0.1:1'], { REDIS_TIMEOUT_MS: '300' })
    expect(dead.code).toBe(1)
    expect(dead.stderr).toMatch(/unreachable/)
  })

  it('stats prints counts per registered queue', async () => {
    const q = new Queue('emails', { connection: redis.client })
    await q.add('x', {}, { jobId: 'a' })
    await q.add('x', {}, { jobId: 'b' })
    await crashedJobs(redis.client, 'sms', 1)
    const human = await echomq(['stats', '--redis-url', redis.url])
    const json = await echomq(['stats', '--json', '--queue', 'emails', '--redis-url', redis.url])
    expect(human.code).toBe(0)
    expect(human.stdout).toMatch(/queue +wait +active +stalled +completed +failed/)
    expect(human.stdout).toMatch(/emails +2 +0 +0 +0 +0/)
    expect(human.stdout).toMatch(/sms +0 +1 +0 +0 +0/)
    expect(JSON.parse(json.stdout)).toEqual({ emails: { wait: 2, active: 0, stalled: 0, delayed: 0, completed: 0, failed: 0 } })
  })

  it('inspect shows in-flight leases, marks and attempts, and failed jobs with their reasons', async () => {
    await crashedJobs(redis.client, 'emails', 2, { attempts: 1 })
    await echomq(['sweep', '--grace', '0', '--queue', 'emails', '--redis-url', redis.url]) // marks j0, j1
    const marked = await echomq(['inspect', 'emails', '--redis-url', redis.url])
    await echomq(['sweep', '--grace', '0', '--queue', 'emails', '--redis-url', redis.url]) // fails them
    const failed = await echomq(['inspect', 'emails', '--json', '--redis-url', redis.url])

    expect(marked.code).toBe(0)
    expect(marked.stdout).toMatch(/j0 +job +lapsed +yes +0\/1/)
    const report = JSON.parse(failed.stdout) as { inFlight: unknown[]; failed: { id: string; failedReason: string }[] }
    expect(report.inFlight).toEqual([])
    expect(report.failed.map((j) => j.id).sort()).toEqual(['j0', 'j1'])
    expect(report.failed[0]?.failedReason).toMatch(/stalled/)
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
    [['nope']],
    [[]],
  ])('rejects %j with exit code 2', async (args) => {
    const { code, stderr, stdout } = await echomq(args, { REDIS_URL: redis.url })
    expect(code).toBe(2)
    expect(stderr + stdout).toMatch(/echomq/)
  })
})

describe('--help', () => {
  it.each([['demo'], ['race'], ['sweep'], ['stats'], ['inspect']])('echomq %s --help', async (command) => {
    const { code, stdout } = await echomq([command, '--help'])
    expect(code).toBe(0)
    expect(stdout).toMatch(new RegExp(`^Usage: echomq ${command}`))
    expect(stdout).toMatch(/--json/)
  })

  it('echomq --help lists the commands', async () => {
    const { code, stdout } = await echomq(['--help'])
    expect(code).toBe(0)
    for (const c of ['demo', 'race', 'sweep', 'stats', 'inspect']) expect(stdout).toContain(`  ${c}`)
  })
})
