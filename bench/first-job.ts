/**
 * First job (issue 32, target 3): the time from `node app.js` to the first job processed, with the installed
 * package, at most BullMQ's. bench/first-job-projects.ts packs EchoMQ and installs it and BullMQ 6.7 into
 * fresh projects with the same app.js (a Queue adds one job, a Worker processes it, the process exits on its
 * `completed` event). A run spawns `node app.js` against a fresh private redis-server of its own and times
 * from the spawn to the app's `processed` line; runs alternate EchoMQ, BullMQ, ... (ROUNDS_FULL each), and the
 * ratio is the median of the rounds' EchoMQ/BullMQ ratios with their range. The app also prints when its
 * imports were done (performance.now() at its first statement: node's start and the package's load).
 * Then one more run per side under MONITOR lists the commands the app sent until it exited
 * (a script call counts once; what a script runs inside Redis is left out).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { Redis } from 'ioredis'
import { startLocalRedis } from '../cli/support/local-redis.js'
import { type Lib, makeProjects } from './first-job-projects.js'
import { commandList, fmt, fs, type Target, table, xs } from './format.js'
import { alternate, type Ctx, ratios, type Spread, spreadOf } from './util.js'

const ROUNDS_FULL = 9
const ROUNDS_QUICK = 5
const RUN_TIMEOUT_MS = 30_000
const LIBS: Lib[] = ['echomq', 'bullmq']

export interface FirstJobRun {
  /** From the spawn to the `processed` line. */
  processedMs: number
  /** From the process's start to its first statement: node's start and the imports. */
  importedMs: number
}

export interface FirstJobResults {
  rounds: number
  versions: Record<Lib, string>
  runs: Record<Lib, FirstJobRun[]>
  processedMs: Record<Lib, Spread>
  importedMs: Record<Lib, Spread>
  ratio: Spread
  /** Commands the app sent until it exited, in order, `c<client> name` (one monitored run). */
  sent: Record<Lib, string[]>
}

function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => child.once('exit', () => resolve()))
}

/** Spawns `node app.js` in `dir` against `port`; resolves at its `processed` line, after it exited. */
async function timeApp(dir: string, port: number): Promise<FirstJobRun> {
  const started = performance.now()
  const child = spawn(process.execPath, ['app.js'], { cwd: dir, env: { ...process.env, REDIS_PORT: String(port) } })
  let out = ''
  let err = ''
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString()
  })
  const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS)
  try {
    const line = await new Promise<{ at: number; text: string }>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString()
        const m = /^processed .*$/m.exec(out)
        if (m) resolve({ at: performance.now(), text: m[0] })
      })
      // 'close', not 'exit': the line may still be in the pipe after the process has exited.
      child.once('close', (code, signal) =>
        reject(new Error(`app.js in ${dir} exited (${code ?? signal}) before "processed": ${out}${err}`)),
      )
    })
    await waitExit(child)
    const m = /^processed \S+ 42 imported ([\d.]+)$/.exec(line.text)
    if (!m) throw new Error(`app.js in ${dir} printed an unexpected line: ${line.text}`)
    return { processedMs: line.at - started, importedMs: Number(m[1]) }
  } finally {
    clearTimeout(timer)
    child.kill('SIGKILL')
    await waitExit(child)
  }
}

/** Commands seen by MONITOR from clients (not from scripts), as `c<n> name`, n the client's order of appearance. */
async function monitorSent(port: number) {
  const meter = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: null })
  const feed = await meter.monitor()
  const sent: string[] = []
  const clients: string[] = []
  let marked = false
  feed.on('monitor', (_time: string, args: string[], source: string) => {
    if (source === 'lua') return
    if (args[0]?.toLowerCase() === 'echo' && args[1] === MARK) marked = true
    if (!clients.includes(source)) clients.push(source)
    sent.push(`c${clients.indexOf(source) + 1} ${String(args[0]).toLowerCase()}`)
  })
  return {
    /** What was sent before now: a marker sent after the app exited, awaited in the feed. */
    async until(): Promise<string[]> {
      await meter.echo(MARK)
      const deadline = performance.now() + 5_000
      while (!marked && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
      if (!marked) throw new Error('first job: MONITOR did not see its marker')
      return sent.slice(0, -1).filter((c) => !c.endsWith(' echo'))
    },
    close() {
      feed.disconnect()
      meter.disconnect()
    },
  }
}
const MARK = 'first-job-mark'

/** One run on a fresh redis-server of its own; with `monitor`, also the commands the app sent, in order. */
async function runOnce(dir: string, monitor: boolean): Promise<FirstJobRun & { sent: string[] }> {
  const server = await startLocalRedis()
  const feed = monitor ? await monitorSent(server.port) : undefined
  try {
    const run = await timeApp(dir, server.port)
    return { ...run, sent: (await feed?.until()) ?? [] }
  } finally {
    feed?.close()
    await server.stop()
  }
}

export async function runFirstJob(ctx: Ctx): Promise<FirstJobResults> {
  const rounds = ctx.quick ? ROUNDS_QUICK : ROUNDS_FULL
  const projects = await makeProjects(ctx.log)
  try {
    const side = (lib: Lib) => async () => {
      const { processedMs, importedMs } = await runOnce(projects.dirs[lib], false)
      return { processedMs, importedMs }
    }
    const runs = await alternate(rounds, { echomq: side('echomq'), bullmq: side('bullmq') })
    const sent = { echomq: (await runOnce(projects.dirs.echomq, true)).sent, bullmq: (await runOnce(projects.dirs.bullmq, true)).sent }
    const result: FirstJobResults = {
      rounds,
      versions: projects.versions,
      runs,
      processedMs: { echomq: spreadOf(runs.echomq, (r) => r.processedMs), bullmq: spreadOf(runs.bullmq, (r) => r.processedMs) },
      importedMs: { echomq: spreadOf(runs.echomq, (r) => r.importedMs), bullmq: spreadOf(runs.bullmq, (r) => r.importedMs) },
      ratio: ratios(runs.echomq, runs.bullmq, (r) => r.processedMs),
      sent,
    }
    ctx.log(`first job: EchoMQ ${fmt(result.processedMs.echomq.median)} ms, BullMQ ${fmt(result.processedMs.bullmq.median)} ms`)
    return result
  } finally {
    projects.remove()
  }
}

/** `c2 evalsha` entries as `{ evalsha: n }`. */
function countOf(sent: string[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const s of sent) {
    const name = s.slice(s.indexOf(' ') + 1)
    counts[name] = (counts[name] ?? 0) + 1
  }
  return counts
}

export function firstJobReport(r: FirstJobResults): string {
  return (
    `First job: \`node app.js\` (a Queue adds one job, a Worker processes it, exit) from the spawn to its "processed" line, ` +
    `the installed package, each run on a fresh redis-server; ms, median (min-max) of ${r.rounds} alternating runs\n` +
    table(
      ['', 'installed', 'to processed, ms', 'imports done, ms', 'commands sent until exit'],
      LIBS.map((lib) => [
        lib === 'echomq' ? 'EchoMQ' : 'BullMQ',
        r.versions[lib],
        fs(r.processedMs[lib]),
        fs(r.importedMs[lib]),
        `${r.sent[lib].length}: ${commandList(countOf(r.sent[lib]))}`,
      ]),
    ) +
    `\n   ratio EchoMQ/BullMQ (to processed): ${xs(r.ratio)}. "imports done": performance.now() at app.js's first statement` +
    ' (node started, the package loaded). Commands: one more run per side under MONITOR, from the start to the exit, a script call counted once.'
  )
}

export function firstJobTargets(r: FirstJobResults): Target[] {
  return [
    {
      name: 'first job: `node app.js` to the first job processed, installed package, <= 1.0x BullMQ',
      pass: r.ratio.median <= 1,
      figures:
        `${fmt(r.processedMs.echomq.median)} vs ${fmt(r.processedMs.bullmq.median)} ms = ${xs(r.ratio)} ` +
        `(imports done at ${fmt(r.importedMs.echomq.median)} vs ${fmt(r.importedMs.bullmq.median)} ms; ` +
        `${r.sent.echomq.length} vs ${r.sent.bullmq.length} commands sent)`,
    },
  ]
}
