/**
 * `echomq race`: the design document's third dive. The same crashed-worker state is built twice; N
 * overlapping app-side checkers run on one copy and N overlapping atomic sweeps on the other, and the
 * recoveries are counted per job.
 *
 * The app-side checker below is the labelled UNSAFE contrast (the Go port's StalledChecker algorithm:
 * list active, then per job EXISTS lock, remove, push, and increment the stall count client-side, each a
 * separate round trip). It lives only here; the library never does this.
 */
import { Redis } from 'ioredis'
import { sweep } from '../../lib/index.js'
import { type QueueKeys, queueKeys } from '../../lib/redis/keys.js'
import { buildCrashedState } from '../support/crashed-state.js'

export interface RaceSide {
  stalled: number
  recoveries: number
  /** Recoveries beyond the first, per job. */
  duplicates: number
  /** Entries in wait beyond one per job. */
  waitDuplicates: number
  /** Jobs whose stall count (stalledCounter) is not exactly one more than before. */
  attemptsWrong: number
}

export interface RaceReport {
  appSide: RaceSide
  atomic: RaceSide
}

async function unsafeAppSideChecker(client: Redis, keys: QueueKeys, recoveries: Map<string, number>): Promise<void> {
  const ids = await client.zrange(keys.active, '0', '-1')
  for (const id of ids) {
    if ((await client.exists(keys.lock(id))) === 1) continue
    await client.zrem(keys.active, id) // the count it returns is ignored, as in the Go port
    await client.lpush(keys.wait, id)
    const made = Number(await client.hget(keys.job(id), 'stalledCounter'))
    await client.hset(keys.job(id), 'stalledCounter', made + 1, 'state', 'wait')
    recoveries.set(id, (recoveries.get(id) ?? 0) + 1)
  }
}

async function tally(client: Redis, keys: QueueKeys, ids: string[], recoveries: Map<string, number>): Promise<RaceSide> {
  const wait = await client.lrange(keys.wait, 0, -1)
  const attempts = await Promise.all(ids.map((id) => client.hget(keys.job(id), 'stalledCounter')))
  const total = [...recoveries.values()].reduce((a, b) => a + b, 0)
  return {
    stalled: ids.length,
    recoveries: total,
    duplicates: total - recoveries.size,
    waitDuplicates: wait.length - new Set(wait).size,
    attemptsWrong: attempts.filter((a) => Number(a) !== 1).length,
  }
}

export async function runRace(
  redisUrl: string,
  jobs: number,
  sweepers: number,
  prefix: string,
  progress: (t: string) => void,
): Promise<RaceReport> {
  const admin = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
  admin.on('error', () => undefined)
  const clients = Array.from({ length: sweepers }, () => {
    const c = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
    c.on('error', () => undefined)
    return c
  })
  try {
    progress(`building ${jobs} crashed jobs, twice`)
    const appKeys = queueKeys(prefix, 'race-app')
    const atomicKeys = queueKeys(prefix, 'race-atomic')
    const appIds = await buildCrashedState(admin, 'race-app', jobs, { prefix })
    const atomicIds = await buildCrashedState(admin, 'race-atomic', jobs, { prefix })

    progress(`${sweepers} app-side checkers at once`)
    const appRecoveries = new Map<string, number>()
    await Promise.all(clients.map((c) => unsafeAppSideChecker(c, appKeys, appRecoveries)))

    progress(`${sweepers} atomic sweeps at once`)
    await sweep(admin, 'race-atomic', { prefix, graceMs: 0 }) // phase 1: mark
    const results = await Promise.all(clients.map((c) => sweep(c, 'race-atomic', { prefix, graceMs: 0 })))
    const atomicRecoveries = new Map<string, number>()
    for (const id of results.flatMap((r) => [...r.recovered, ...r.failed])) atomicRecoveries.set(id, (atomicRecoveries.get(id) ?? 0) + 1)

    return {
      appSide: await tally(admin, appKeys, appIds, appRecoveries),
      atomic: await tally(admin, atomicKeys, atomicIds, atomicRecoveries),
    }
  } finally {
    for (const c of [admin, ...clients]) c.disconnect()
  }
}
