/**
 * `npx tsx bench/callgrind.ts [--jobs N] [--only plain,function,...] [--lib emq,bull]`
 *
 * Redis CPU per job, counted rather than timed: redis-server runs under valgrind's callgrind, its
 * instruction counter zeroed just before the scenario's adds and dumped after its last job completed, so
 * the figure is the instructions Redis executed for the workload, also given without its timer's
 * (serverCron, which runs by wall time). Unlike used_cpu_user on a loaded machine, the count does not
 * depend on the load (a run's own timing still moves it a few percent: how the worker's calls batch).
 * User-space instructions only: the kernel's share (a syscall per command read and reply written) is not
 * in it, which favours the library that sends more commands. Also reports INFO commandstats: every
 * command Redis ran per job, those that scripts run included.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { freePort } from '../cli/support/local-redis.js'
import * as emq from '../lib/index.js'
import { createWorkerHandler } from '../lib/lambda/index.js'
import { type Connection, FUNCTION_CONCURRENCY, JOBS_PER_INVOCATION, QUEUE, runBull, runEmq } from './cost-runners.js'
import { COST_SCENARIOS, DEFAULT_SCENARIOS, type Scenario } from './cost-scenarios.js'

const args = process.argv.slice(2)
const opt = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? (args[i + 1] ?? fallback) : fallback
}
const jobs = Number(opt('jobs', '2000'))
const only = opt('only', DEFAULT_SCENARIOS.join(',')).split(',')
const libs = opt('lib', 'emq,bull').split(',') as ('emq' | 'bull')[]

async function startServer(): Promise<{ port: number; dir: string; child: ChildProcess }> {
  const port = await freePort()
  const dir = mkdtempSync(path.join(tmpdir(), 'echomq-cg-'))
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', `--callgrind-out-file=${dir}/cg.out`, 'redis-server', '--port', String(port), '--bind', '127.0.0.1'].concat([
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--maxmemory-policy',
      'noeviction',
    ]),
    { stdio: 'ignore', cwd: dir },
  )
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  probe.on('error', () => undefined)
  const deadline = performance.now() + 60_000
  for (;;) {
    try {
      await probe.connect()
      if ((await probe.ping()) === 'PONG') break
    } catch {
      if (performance.now() > deadline) throw new Error('valgrind redis-server did not start')
      await new Promise((r) => setTimeout(r, 200))
    }
  }
  probe.disconnect()
  return { port, dir, child }
}

function control(pid: number, flag: string, dir: string): void {
  execFileSync('callgrind_control', [flag, String(pid)], { cwd: dir, stdio: 'ignore' })
}

function dumpedInstructions(dir: string): number {
  const files = readdirSync(dir).filter((f) => f.startsWith('cg.out'))
  let best = 0
  for (const f of files) {
    const text = readFileSync(path.join(dir, f), 'utf8')
    const m = /^(?:summary|totals): (\d+)/m.exec(text)
    if (m && f !== 'cg.out') best = Math.max(best, Number(m[1]))
  }
  return best
}

/**
 * Instructions of Redis's timer (serverCron: memory stats, expiry, resizing), which run by wall time: under
 * callgrind a run lasts some 50 times longer, so they would weigh 50 times what they weigh in production.
 */
function cronInstructions(dir: string): number {
  const file = readdirSync(dir).find((f) => f.startsWith('cg.out.'))
  if (!file) return 0
  const text = execFileSync('callgrind_annotate', ['--inclusive=yes', path.join(dir, file)], { encoding: 'utf8', maxBuffer: 1 << 26 })
  const m = /^\s*([\d,]+) \([^)]*\)\s+\?\?\?:serverCron /m.exec(text)
  return m ? Number((m[1] as string).replaceAll(',', '')) : 0
}

async function commandstats(port: number): Promise<Record<string, number>> {
  const r = new Redis(port, '127.0.0.1')
  const text = await r.info('commandstats')
  await r.quit()
  const out: Record<string, number> = {}
  for (const m of text.matchAll(/cmdstat_([\w|]+):calls=(\d+)/g)) out[m[1] as string] = Number(m[2])
  return out
}

/** As bench/cost-runners.ts runs the function scenario, with timeouts fit for a Redis under callgrind. */
async function runFunction(connection: Connection & Record<string, unknown>, scenario: Scenario, n: number): Promise<void> {
  const queue = new emq.Queue(QUEUE, { connection })
  for (const chunk of scenario.chunks(n)) await queue.addBulk(chunk as never[])
  const handler = createWorkerHandler(QUEUE, scenario.processor(), {
    connection,
    concurrency: scenario.functionConcurrency ?? FUNCTION_CONCURRENCY,
    redisTimeoutMs: 60_000,
    jobTimeoutMs: 300_000,
  })
  const end = performance.now() + 1_200_000
  const context = { getRemainingTimeInMillis: () => end - performance.now() }
  let done = 0
  while (done < n) {
    const result = await handler({ queue: QUEUE, maxJobs: JOBS_PER_INVOCATION }, context)
    done += result.completed
  }
  await handler.close()
  await queue.close()
}

for (const name of only) {
  const scenario = COST_SCENARIOS.find((s) => s.name === name)
  if (!scenario) throw new Error(`no scenario ${name}`)
  for (const lib of libs) {
    const { port, dir, child } = await startServer()
    const pid = child.pid as number
    try {
      const r = new Redis(port, '127.0.0.1')
      await r.config('RESETSTAT')
      await r.quit()
      control(pid, '-z', dir)
      // Redis under callgrind answers some 50 times slower: no call may time out.
      const slow = { connectTimeout: 600_000, commandTimeout: 600_000 }
      const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null, ...slow }
      const t0 = performance.now()
      if (lib === 'bull') await runBull(connection, scenario, jobs)
      else if (scenario.emqRunner === 'function') await runFunction(connection, scenario, jobs)
      else await runEmq(connection, scenario, jobs)
      control(pid, '-d', dir)
      const instr = dumpedInstructions(dir)
      const cron = cronInstructions(dir)
      const keep = opt('keep', '')
      if (keep)
        for (const f of readdirSync(dir).filter((f) => f.startsWith('cg.out.')))
          copyFileSync(path.join(dir, f), `${keep}/${name}-${lib}.out`)
      const stats = await commandstats(port)
      const per = Object.entries(stats)
        .filter(([k]) => k !== 'info' && k !== 'config|resetstat')
        .map(([k, v]) => [k, v / jobs] as const)
        .filter(([, v]) => v >= 0.01)
        .sort((a, b) => b[1] - a[1])
      const total = per.reduce((s, [, v]) => s + v, 0)
      console.log(
        `${name.padEnd(13)} ${lib.padEnd(4)} instr/job ${Math.round(instr / jobs)
          .toLocaleString('en-US')
          .padStart(9)}  ` +
          `without serverCron ${Math.round((instr - cron) / jobs)
            .toLocaleString('en-US')
            .padStart(9)}  ` +
          `redis cmds/job ${total.toFixed(2)}  (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
      )
      console.log(`   ${per.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`)
    } finally {
      child.kill('SIGKILL')
      await new Promise((r) => child.once('exit', r))
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
process.exit(0)
