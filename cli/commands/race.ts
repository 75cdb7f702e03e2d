/**
 * `echomq race`: the design document's third dive, overlapping app-side checkers against overlapping
 * atomic sweeps on the same crashed state (../race.ts runs both). This module takes the sizes, keeps the run
 * under its own prefix on a Redis it did not start (and deletes it after), and prints the side-by-side table.
 */
import { deleteUnderPrefix } from '../../lib/redis/queries.js'
import { command } from '../command.js'
import { out, table, withSpinner } from '../format.js'
import { positiveInt } from '../input.js'
import { withClient, withDemoRedis } from '../redis.js'
import { type RaceSide, runRace } from '../scenes/race.js'

export const race = command({
  summary: 'overlapping app-side checkers against overlapping atomic sweeps',
  usage: `echomq race [--jobs 1000] [--sweepers 8]

Builds the same crashed-worker state twice. Runs N overlapping app-side checkers (the unsafe Go-port
algorithm: list active, EXISTS lock, remove, push, attempts +1 client-side, separate round trips) on one
copy and N overlapping atomic sweeps on the other, then counts recoveries per job.
Without --redis-url, REDIS_URL or REDIS_URL_PARAMETER it starts its own redis-server.

  --jobs <n>          stalled jobs (default 1000)
  --sweepers <n>      overlapping checkers / sweeps (default 8)`,
  options: { jobs: { type: 'string' }, sweepers: { type: 'string' } },
  async run(values) {
    const jobs = positiveInt(values, 'jobs', 1000, 1_000_000)
    const sweepers = positiveInt(values, 'sweepers', 8, 256)
    const { json } = values
    const prefix = `emq-race-${process.pid}`
    const report = await withDemoRedis(values, (url, own) =>
      withSpinner('race', !json && Boolean(process.stderr.isTTY), async (s) => {
        try {
          return await runRace(url, jobs, sweepers, prefix, (t) => s.text(t))
        } finally {
          if (!own) await withClient(url, (c) => deleteUnderPrefix(c, prefix))
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
          row('stall counts mis-incremented', (s) => s.attemptsWrong),
        ],
      ),
    )
  },
})
