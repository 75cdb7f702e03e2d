/**
 * `echomq demo`: the design document's scene played by real worker processes (../demo.ts), for a reader who
 * wants to watch a killed worker's jobs recovered and a paused one's left alone. This module turns the flags
 * into the scene's roles and sizes and prints as it goes, or one JSON document at the end.
 */
import { redactUrl } from '../../lib/redis/connection.js'
import { command } from '../command.js'
import { CliError } from '../errors.js'
import { out, spinner } from '../format.js'
import { listOf, positiveInt } from '../input.js'
import { withDemoRedis } from '../redis.js'
import { type Role, runDemo, WORKER_NAMES } from '../scenes/demo.js'

/** --kill / --pause: worker names, `none` for none, `fallback` when absent. */
function workers(flag: string, raw: string[] | undefined, fallback: string[]): string[] {
  if (raw === undefined) return fallback
  if (raw.length === 1 && raw[0] === 'none') return []
  const list = listOf(raw)
  for (const w of list) {
    if (!WORKER_NAMES.some((name) => name === w))
      throw new CliError(`--${flag} takes worker names ${WORKER_NAMES.join(', ')}, got: ${w}`, true)
  }
  return list
}

export const demo = command({
  summary: 'crash, pause and sweep real worker processes, with a readout after each sweep',
  usage: `echomq demo [--kill w1] [--pause w2] [--jobs 2] [--lease 1000]

Starts three worker processes (w1, w2, w3) holding a few jobs each. By default w1 is killed (SIGKILL),
w2 is paused (SIGSTOP) past its lease and resumed (SIGCONT) before the second sweep, and w3 stays healthy;
one of the killed worker's jobs has stalled once before (its second stall fails it). Then sweep 1 and sweep 2, each with a readout.
Without --redis-url, REDIS_URL or REDIS_URL_PARAMETER it starts its own redis-server in a temporary directory.

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
    const kill = workers('kill', values.kill, ['w1'])
    const pause = workers('pause', values.pause, ['w2'])
    const both = kill.filter((w) => pause.includes(w))
    if (both.length > 0) throw new CliError(`a worker cannot be both killed and paused: ${both.join(', ')}`, true)
    const roles: Record<string, Role> = Object.fromEntries(
      WORKER_NAMES.map((w) => [w, kill.includes(w) ? 'killed' : pause.includes(w) ? 'paused' : 'healthy']),
    )
    const jobsPerWorker = positiveInt(values, 'jobs', 2, 50)
    const leaseMs = positiveInt(values, 'lease', 1000, 60_000)
    if (leaseMs < 200) throw new CliError('--lease must be at least 200 ms', true)
    const { json } = values
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
    if (json) {
      out(
        JSON.stringify({
          jobs: jobs.map(({ id, worker, sweep1, sweep2, stalls }) => ({ id, worker, sweep1, sweep2, stalls })),
        }),
      )
    }
  },
})
