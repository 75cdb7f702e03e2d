/**
 * The `echomq` command: demo, race, sweep, stats, inspect, jobs, retry, remove. Tables by default, `--json`
 * for scripts, `--help` on every command. Redis: --redis-url, then REDIS_URL, then the local default (demo
 * and race start their own redis-server; the others use redis://127.0.0.1:6379). Exit codes: 0 success,
 * 1 failure (Redis unreachable, no such queue or job, a job in the wrong state), 2 bad usage or input.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util'
import { clearLongTimeout, longTimeout } from '../lib/clock.js'
import { EchoMQError, withLastError } from '../lib/errors.js'
import { JOB_STATES, type JobState } from '../lib/job.js'
import { DEFAULTS, PREFIX_DEFAULT, validateJobId, validatePrefix, validateQueueName } from '../lib/options.js'
import { MAX_JOBS_PER_CALL } from '../lib/queue.js'
import { type MetricsMode, reaperConfig } from '../lib/reaper/config.js'
import { createReaper, type Log } from '../lib/reaper/reaper.js'
import {
  failFast,
  lastConnectionError,
  openConnection,
  parseRedisUrl,
  REDIS_URL_DEFAULT,
  type RedisClient,
  redactUrl,
} from '../lib/redis/connection.js'
import { deleteUnderPrefix as deletePrefix } from '../lib/redis/queries.js'
import { type Role, runDemo, WORKER_NAMES } from './demo.js'
import { CliError } from './errors.js'
import { parseDuration, spinner, table, withSpinner } from './format.js'
import { inspect, renderInspection, stats } from './inspect.js'
import { dryRunAll, dryRunIds, listJobs, type RetryReport, renderJobList, renderRetry, withQueue } from './jobs.js'
import { startLocalRedis } from './support/local-redis.js'
import { type RaceSide, runRace } from './race.js'

type Options = NonNullable<ParseArgsConfig['options']>

const COMMON: Options = {
  'redis-url': { type: 'string' },
  prefix: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
}
const COMMON_HELP = `  --redis-url <url>   Redis to use (default: REDIS_URL, then the local default)
  --prefix <prefix>   key prefix (default: ${PREFIX_DEFAULT})
  --json              print JSON instead of tables
  -h, --help          show this help`

interface Command {
  summary: string
  usage: string
  options: Options
  positionals?: number
  run(values: Record<string, unknown>, positionals: string[]): Promise<void>
}

const out = (text: string): void => void process.stdout.write(`${text}\n`)

function redisUrl(values: Record<string, unknown>): string | undefined {
  const url = (values['redis-url'] as string | undefined) ?? process.env.REDIS_URL
  if (url === undefined || url === '') return undefined
  try {
    parseRedisUrl(url)
  } catch (err) {
    throw new CliError((err as Error).message, true)
  }
  return url
}

function prefixOf(values: Record<string, unknown>): string {
  try {
    return validatePrefix((values.prefix as string | undefined) ?? PREFIX_DEFAULT)
  } catch (err) {
    throw new CliError((err as Error).message, true)
  }
}

function queueNames(list: unknown): string[] | undefined {
  const names = ((list as string[] | undefined) ?? [])
    .flatMap((q) => q.split(','))
    .map((q) => q.trim())
    .filter(Boolean)
  if (names.length === 0) return undefined
  try {
    return names.map((q) => validateQueueName(q))
  } catch (err) {
    throw new CliError((err as Error).message, true)
  }
}

function positiveInt(values: Record<string, unknown>, name: string, fallback: number, max: number): number {
  const raw = values[name] as string | undefined
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max)
    throw new CliError(`--${name} expects an integer from 1 to ${max}, got: ${raw}`, true)
  return Number(raw)
}

/** An integer from 0 (a rank), or `fallback` when the option is absent. */
function rank(values: Record<string, unknown>, name: string, fallback: number): number {
  const raw = values[name] as string | undefined
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw new CliError(`--${name} expects an integer from 0, got: ${raw}`, true)
  return Number(raw)
}

/** The one queue a command names as its first argument. */
function queueArg(positionals: string[], usage: string): string {
  const [queue] = positionals
  if (!queue) throw new CliError(`a queue name is needed: ${usage}`, true)
  try {
    return validateQueueName(queue)
  } catch (err) {
    throw new CliError((err as Error).message, true)
  }
}

/** --id values (repeatable or comma lists), validated and without repeats. */
function jobIds(raw: unknown): string[] {
  const ids = [
    ...new Set(
      ((raw as string[] | undefined) ?? [])
        .flatMap((v) => v.split(','))
        .map((v) => v.trim())
        .filter(Boolean),
    ),
  ]
  if (ids.length > MAX_JOBS_PER_CALL) throw new CliError(`--id takes at most ${MAX_JOBS_PER_CALL} ids, got ${ids.length}`, true)
  return ids.map((id) => validateJobId(id))
}

async function withClient<T>(url: string, fn: (client: RedisClient) => Promise<T>): Promise<T> {
  const conn = openConnection(url, { redisOptions: failFast(DEFAULTS.redisTimeoutMs) })
  try {
    return await fn(conn.client)
  } catch (err) {
    if (err instanceof EchoMQError || err instanceof CliError) throw err
    throw new CliError(
      `Redis at ${redactUrl(url)} is unreachable: ${withLastError((err as Error).message, lastConnectionError(conn.client))}`,
    )
  } finally {
    conn.client.disconnect()
  }
}

/** The Redis for demo and race: the given one, or a private redis-server started for the run. */
async function withDemoRedis<T>(values: Record<string, unknown>, fn: (url: string, own: boolean) => Promise<T>): Promise<T> {
  const given = redisUrl(values)
  if (given) return fn(given, false)
  const local = await startLocalRedis()
  try {
    return await fn(local.url, true)
  } finally {
    await local.stop()
  }
}

function workerList(raw: unknown, flag: string): string[] {
  const list = ((raw as string[] | undefined) ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean)
  for (const w of list)
    if (!(WORKER_NAMES as readonly string[]).includes(w))
      throw new CliError(`--${flag} takes worker names ${WORKER_NAMES.join(', ')}, got: ${w}`, true)
  return list
}

const commands: Record<string, Command> = {
  demo: {
    summary: 'crash, pause and sweep real worker processes, with a readout after each sweep',
    usage: `echomq demo [--kill w1] [--pause w2] [--jobs 2] [--lease 1000]

Starts three worker processes (w1, w2, w3) holding a few jobs each. By default w1 is killed (SIGKILL),
w2 is paused (SIGSTOP) past its lease and resumed (SIGCONT) before the second sweep, and w3 stays healthy;
one of the killed worker's jobs is on its last attempt. Then sweep 1 and sweep 2, each with a readout.
Without --redis-url or REDIS_URL it starts its own redis-server in a temporary directory.

  --kill <w,...>      workers to kill (default w1; "none" for none)
  --pause <w,...>     workers to pause (default w2; "none" for none)
  --jobs <n>          jobs per worker (default 2)
  --lease <ms>        lease duration of the workers (default 1000)`,
    options: {
      kill: { type: 'string', multiple: true },
      pause: { type: 'string', multiple: true },
      jobs: { type: 'string' },
      lease: { type: 'string' },
    },
    async run(values) {
      const none = (v: unknown) => Array.isArray(v) && v.length === 1 && v[0] === 'none'
      const kill = none(values.kill) ? [] : values.kill ? workerList(values.kill, 'kill') : ['w1']
      const pause = none(values.pause) ? [] : values.pause ? workerList(values.pause, 'pause') : ['w2']
      const both = kill.filter((w) => pause.includes(w))
      if (both.length > 0) throw new CliError(`a worker cannot be both killed and paused: ${both.join(', ')}`, true)
      const roles: Record<string, Role> = Object.fromEntries(
        WORKER_NAMES.map((w) => [w, kill.includes(w) ? 'killed' : pause.includes(w) ? 'paused' : 'healthy']),
      )
      const jobsPerWorker = positiveInt(values, 'jobs', 2, 50)
      const leaseMs = positiveInt(values, 'lease', 1000, 60_000)
      if (leaseMs < 200) throw new CliError('--lease must be at least 200 ms', true)
      const json = values.json as boolean
      const jobs = await withDemoRedis(values, async (url, ownRedis) => {
        if (!json) out(ownRedis ? `Started a private redis-server at ${url}` : `Using Redis at ${redactUrl(url)}`)
        const spin = spinner('starting', !json && Boolean(process.stderr.isTTY))
        try {
          return await runDemo({
            redisUrl: url,
            ownRedis,
            roles,
            jobsPerWorker,
            leaseMs,
            say: json
              ? () => undefined
              : (t) => {
                  spin.text('')
                  out(t)
                },
            progress: (t) => spin.text(t),
          })
        } finally {
          spin.stop()
        }
      })
      if (json)
        out(
          JSON.stringify({
            jobs: jobs.map(({ id, worker, sweep1, sweep2, attemptsMade }) => ({ id, worker, sweep1, sweep2, attemptsMade })),
          }),
        )
    },
  },
  race: {
    summary: 'overlapping app-side checkers against overlapping atomic sweeps',
    usage: `echomq race [--jobs 1000] [--sweepers 8]

Builds the same crashed-worker state twice. Runs N overlapping app-side checkers (the unsafe Go-port
algorithm: list active, EXISTS lock, remove, push, attempts +1 client-side, separate round trips) on one
copy and N overlapping atomic sweeps on the other, then counts recoveries per job.
Without --redis-url or REDIS_URL it starts its own redis-server.

  --jobs <n>          stalled jobs (default 1000)
  --sweepers <n>      overlapping checkers / sweeps (default 8)`,
    options: { jobs: { type: 'string' }, sweepers: { type: 'string' } },
    async run(values) {
      const jobs = positiveInt(values, 'jobs', 1000, 1_000_000)
      const sweepers = positiveInt(values, 'sweepers', 8, 256)
      const json = values.json as boolean
      const prefix = `emq-race-${process.pid}`
      const report = await withDemoRedis(values, (url, own) =>
        withSpinner('race', !json && Boolean(process.stderr.isTTY), async (s) => {
          try {
            return await runRace(url, jobs, sweepers, prefix, (t) => s.text(t))
          } finally {
            if (!own) await withClient(url, (c) => deletePrefix(c, prefix))
          }
        }),
      )
      if (json) return out(JSON.stringify(report))
      const row = (label: string, pick: (s: RaceSide) => number) => [label, pick(report.appSide), pick(report.atomic)]
      out(
        table(
          ['', 'app-side checkers (unsafe)', 'atomic sweep'],
          [
            row('jobs stalled', (s) => s.stalled),
            row('recoveries', (s) => s.recoveries),
            row('jobs recovered more than once (extra recoveries)', (s) => s.duplicates),
            row('duplicate entries in wait', (s) => s.waitDuplicates),
            row('attempts mis-incremented', (s) => s.attemptsWrong),
          ],
        ),
      )
    },
  },
  sweep: {
    summary: 'run the reaper (what the Lambda runs) once, or on an interval as a daemon',
    usage: `echomq sweep [--queue q ...] [--every 10s] [--times n] [--grace ${DEFAULTS.sweepGraceMs}] [--metrics off]

Runs the reaper the Lambda handler runs, for hosts without Lambda (cron, a Kubernetes CronJob, or a
daemon with --every). Other settings come from the same environment variables as the Lambda (see README).
With --every, a run that fails (Redis unreachable, a queue whose sweep failed) is reported and the loop
keeps its schedule, reconnecting for the next run; it stops on SIGINT or SIGTERM (or after --times runs)
and then exits 1 if any run failed.

  --queue <q>         queue to sweep (repeatable or comma list; default: QUEUES, else every registered queue)
  --every <duration>  sweep on an interval (10s, 500ms, 1m) until stopped
  --times <n>         with --every: stop after n runs
  --grace <ms>        minimum age of a mark before recovery (default: SWEEP_GRACE_MS, else ${DEFAULTS.sweepGraceMs})
  --metrics <mode>    api | emf | off (default: METRICS_MODE, else off)`,
    options: {
      queue: { type: 'string', multiple: true },
      every: { type: 'string' },
      times: { type: 'string' },
      grace: { type: 'string' },
      metrics: { type: 'string' },
    },
    async run(values) {
      const every = values.every === undefined ? undefined : parseDuration(values.every as string)
      if (values.every !== undefined && every === undefined)
        throw new CliError(`--every expects a duration such as 10s or 500ms, got: ${values.every}`, true)
      if (every === undefined && values.times !== undefined) throw new CliError('--times only goes with --every', true)
      const times = every === undefined ? 1 : positiveInt(values, 'times', Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)
      const json = values.json as boolean
      const queues = queueNames(values.queue)
      const grace = values.grace as string | undefined
      if (grace !== undefined && !/^\d+$/.test(grace)) throw new CliError(`--grace expects a whole number of ms, got: ${grace}`, true)
      const config = reaperConfig({
        redisUrl: redisUrl(values) ?? process.env.REDIS_URL ?? REDIS_URL_DEFAULT,
        prefix: prefixOf(values),
        ...(queues ? { queues } : {}),
        ...(grace !== undefined ? { graceMs: Number(grace) } : {}),
        ...(values.metrics !== undefined
          ? { metricsMode: values.metrics as MetricsMode }
          : process.env.METRICS_MODE
            ? {}
            : { metricsMode: 'off' as const }),
      })
      const log: Log = (level, message, fields) =>
        level !== 'info' && process.stderr.write(`${level}: ${message} ${fields ? JSON.stringify(fields) : ''}\n`)
      const reaper = createReaper(config, { log })
      let stop = false
      let wakeUp: () => void = () => undefined
      const interrupt = () => {
        stop = true
        wakeUp()
      }
      process.once('SIGINT', interrupt)
      process.once('SIGTERM', interrupt)
      let failedRuns = 0
      try {
        for (let n = 0; n < times && !stop; n++) {
          if (n > 0) {
            await new Promise<void>((resolve) => {
              // Any length: a plain setTimeout over 24.8 days fires at once (sweeps back to back).
              const timer = longTimeout(resolve, every as number)
              wakeUp = () => {
                clearLongTimeout(timer)
                resolve()
              }
            })
            if (stop) break
          }
          try {
            const summary = await withSpinner('sweeping', !json && Boolean(process.stderr.isTTY), () => reaper.run())
            if (Object.values(summary.queues).some((r) => r.error)) failedRuns++
            if (json) out(JSON.stringify(summary))
            else {
              out(`${new Date().toISOString()}  sweep of ${Object.keys(summary.queues).length} queue(s)`)
              out(
                table(
                  ['queue', 'marked', 'recovered', 'failed', 'error'],
                  Object.entries(summary.queues).map(([q, r]) => [q, r.marked, r.recovered, r.failed, r.error ?? '']),
                ),
              )
            }
          } catch (err) {
            // Once: the error is the command's result. On an interval: a daemon reports it and keeps going.
            if (every === undefined) throw err
            failedRuns++
            const code = err instanceof EchoMQError ? `${err.code}: ` : ''
            process.stderr.write(
              `${new Date().toISOString()}  sweep failed, next try in ${values.every}: ${code}${(err as Error).message}\n`,
            )
          }
        }
      } finally {
        process.off('SIGINT', interrupt)
        process.off('SIGTERM', interrupt)
        await reaper.close()
      }
      if (failedRuns > 0) process.exitCode = 1
    },
  },
  stats: {
    summary: 'wait / delayed / active / stalled / completed / failed per queue',
    usage: `echomq stats [--queue q ...]

  --queue <q>         queue to show (repeatable or comma list; default: every registered queue)`,
    options: { queue: { type: 'string', multiple: true } },
    async run(values) {
      const url = redisUrl(values) ?? REDIS_URL_DEFAULT
      const queues = queueNames(values.queue)
      const result = await withClient(url, (c) => stats(c, prefixOf(values), queues))
      if (values.json) return out(JSON.stringify(result))
      const rows = Object.entries(result).map(([q, c]) => [q, c.wait, c.delayed, c.active, c.stalled, c.completed, c.failed])
      const headers = ['queue', 'wait', 'delayed', 'active', 'stalled', 'completed', 'failed']
      out(rows.length === 0 ? 'no queues registered' : table(headers, rows))
    },
  },
  inspect: {
    summary: 'in-flight jobs with their leases and workers, delayed jobs, failed jobs with their reasons',
    usage: `echomq inspect <queue> [--limit 50]

Counts, then three sections: jobs in flight (worker, lease time left, whether the sweep marked it,
attempts), delayed jobs (due in, by Redis's clock; the last error of a retry in backoff), failed jobs
(worker, attempts, reason). Exits 1 for a queue that is not registered and holds no jobs.

  --limit <n>         rows per section (default 50)`,
    options: { limit: { type: 'string' } },
    positionals: 1,
    async run(values, positionals) {
      const queue = queueArg(positionals, 'echomq inspect <queue>')
      const limit = positiveInt(values, 'limit', 50, 10_000)
      const url = redisUrl(values) ?? REDIS_URL_DEFAULT
      const result = await withClient(url, (c) => withQueue(c, prefixOf(values), queue, (q) => inspect(q, limit)))
      out(values.json ? JSON.stringify(result) : renderInspection(queue, result))
    },
  },
  jobs: {
    summary: 'the jobs of a queue in one state (failed by default), a page at a time',
    usage: `echomq jobs <queue> [--state failed] [--limit 50] [--start 0]

Lists jobs in one state with their attempts (made/allowed) and the worker that took them last, and per
state: failed (finish time, reason), delayed (due in, last error), active (start time, last error),
wait (last error, kept from a retried failure), completed (finish time). Orders: wait in the order the
jobs will run, delayed earliest due first, active earliest lease deadline first, completed and failed
most recent first. Exits 1 for a queue that is not registered and holds no jobs.

  --state <state>     ${JOB_STATES.join(', ')} (default failed)
  --limit <n>         jobs to list (default 50, at most 10000)
  --start <n>         rank to start from, 0 first (default 0): the next page is --start <start + limit>`,
    options: { state: { type: 'string' }, limit: { type: 'string' }, start: { type: 'string' } },
    positionals: 1,
    async run(values, positionals) {
      const queue = queueArg(positionals, 'echomq jobs <queue>')
      const state = (values.state as string | undefined) ?? 'failed'
      if (!(JOB_STATES as readonly string[]).includes(state))
        throw new CliError(`--state expects one of ${JOB_STATES.join(', ')}, got: ${state}`, true)
      const limit = positiveInt(values, 'limit', 50, 10_000)
      const start = rank(values, 'start', 0)
      const url = redisUrl(values) ?? REDIS_URL_DEFAULT
      const list = await withClient(url, (c) => withQueue(c, prefixOf(values), queue, (q) => listJobs(q, state as JobState, start, limit)))
      out(values.json ? JSON.stringify(list) : renderJobList(list))
    },
  },
  retry: {
    summary: 'send failed jobs back to wait with a fresh attempts budget',
    usage: `echomq retry <queue> (--id <id> ... | --all [--limit n]) [--dry-run]

Moves failed jobs to the back of wait with attemptsMade 0; each keeps its history (the failure becomes
its lastError). With --id every job named must be failed, else nothing changes and the command exits 1.
With --all the oldest failed jobs go first. Prints the ids moved.

  --id <id>           a failed job to retry (repeatable or comma list, at most ${MAX_JOBS_PER_CALL})
  --all               every failed job (up to --limit)
  --limit <n>         with --all: retry at most n jobs
  --dry-run           change nothing: print what would be retried (with --id: each job's state, and
                      exit 1 when one is not failed, as the real run would)`,
    options: {
      id: { type: 'string', multiple: true },
      all: { type: 'boolean', default: false },
      limit: { type: 'string' },
      'dry-run': { type: 'boolean', default: false },
    },
    positionals: 1,
    async run(values, positionals) {
      const queue = queueArg(positionals, 'echomq retry <queue> (--id <id> ... | --all)')
      const ids = jobIds(values.id)
      const all = values.all as boolean
      if (all === (values.id !== undefined)) throw new CliError('give exactly one of --id <id> and --all', true)
      if (!all && ids.length === 0) throw new CliError('--id needs a job id', true)
      if (!all && values.limit !== undefined) throw new CliError('--limit goes with --all (--id retries exactly the jobs named)', true)
      const limit = values.limit === undefined ? undefined : positiveInt(values, 'limit', 1, Number.MAX_SAFE_INTEGER)
      const dryRun = values['dry-run'] as boolean
      const url = redisUrl(values) ?? REDIS_URL_DEFAULT
      const report = await withClient(url, (c) =>
        withQueue(c, prefixOf(values), queue, async (q): Promise<RetryReport> => {
          if (dryRun) return all ? dryRunAll(q, limit) : dryRunIds(q, ids)
          const retried = await q.retryJobs(all ? (limit === undefined ? {} : { limit }) : { ids })
          return { queue, dryRun, retried }
        }),
      )
      out(values.json ? JSON.stringify(report) : renderRetry(report))
      if (report.jobs?.some((j) => j.state !== 'failed')) process.exitCode = 1
    },
  },
  remove: {
    summary: 'remove a job that is not in flight',
    usage: `echomq remove <queue> <id>

Removes the job and its entry in wait, delayed, completed or failed; its id may be used again. Exits 0
when it removed the job, 1 when there is no such job, and 1 (changing nothing) when the job is in
flight: its worker owns it until it finishes or its lease lapses.`,
    options: {},
    positionals: 2,
    async run(values, positionals) {
      const queue = queueArg(positionals, 'echomq remove <queue> <id>')
      const [, raw] = positionals
      if (raw === undefined) throw new CliError('remove needs a job id: echomq remove <queue> <id>', true)
      const id = validateJobId(raw)
      const url = redisUrl(values) ?? REDIS_URL_DEFAULT
      const removed = await withClient(url, (c) => withQueue(c, prefixOf(values), queue, (q) => q.remove(id)))
      if (values.json) out(JSON.stringify({ queue, id, removed }))
      else if (removed) out(`removed job ${id} from queue ${queue}`)
      else throw new CliError(`no job ${id} in queue ${queue}`)
      if (!removed) process.exitCode = 1
    },
  },
}

function mainHelp(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length))
  return `echomq: stalled-job recovery for Redis job queues

Usage: echomq <command> [options]

Commands:
${Object.entries(commands)
  .map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`)
  .join('\n')}

Run "echomq <command> --help" for a command's options.`
}

/** Options may come before the command (`echomq --redis-url URL stats`): the command is the first word that names one. */
function commandFirst(argv: string[]): string[] {
  if (!argv[0]?.startsWith('-') || ['--help', '-h'].includes(argv[0])) return argv
  const at = argv.findIndex((arg) => Object.hasOwn(commands, arg))
  return at === -1 ? [] : [argv[at] as string, ...argv.slice(0, at), ...argv.slice(at + 1)]
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = commandFirst(argv)
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    if (name === undefined && argv.length > 0) process.stderr.write('echomq: no command given\n\n')
    out(mainHelp())
    return name === undefined ? 2 : 0
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined
  if (!command) {
    process.stderr.write(`echomq: unknown command "${name}"\n\n${mainHelp()}\n`)
    return 2
  }
  try {
    let parsed: ReturnType<typeof parseArgs>
    try {
      parsed = parseArgs({ args: rest, options: { ...COMMON, ...command.options }, allowPositionals: true, strict: true })
    } catch (err) {
      throw new CliError((err as Error).message, true)
    }
    const { values, positionals } = parsed
    if (values.help) {
      out(`Usage: ${command.usage}\n\nCommon options:\n${COMMON_HELP}`)
      return 0
    }
    if (positionals.length > (command.positionals ?? 0))
      throw new CliError(`unexpected argument: ${positionals[command.positionals ?? 0]}`, true)
    await command.run(values, positionals)
    return typeof process.exitCode === 'number' ? process.exitCode : 0
  } catch (err) {
    const usage = err instanceof CliError && err.usage
    const inputError = err instanceof EchoMQError && ['ERR_QUEUE_NAME', 'ERR_JOB_ID', 'ERR_OPTIONS', 'ERR_CONFIG'].includes(err.code)
    process.stderr.write(
      `echomq ${name}: ${(err as Error).message}\n${usage || inputError ? `Run "echomq ${name} --help" for usage.\n` : ''}`,
    )
    return usage || inputError ? 2 : 1
  }
}
