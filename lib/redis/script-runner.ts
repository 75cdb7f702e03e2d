/**
 * The one module that runs Lua scripts (the script modules beside it each own their scripts' KEYS and
 * ARGV order and call `evalScript`). Scripts run with EVALSHA, falling back to EVAL on NOSCRIPT (a
 * restarted or failed-over Redis has an empty script cache; EVAL also re-caches it). Every call passes at
 * least one key, so Redis Cluster routes it to the queue's slot.
 */

import { EchoMQError } from '../errors.js'
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'
import { loadScript, type Script } from './scripts.js'

export { loadScript, setScriptWrapper } from './scripts.js'

/** Most script calls whose writes are held back together: Redis starts on a burst's first while the rest are written. */
const CORK_MAX = 8
const corked = new WeakMap<object, number>()

/**
 * Holds a connection's writes until the end of this tick, CORK_MAX calls at a time, so the script calls a
 * busy worker makes in one tick (one per finished job) leave in one write instead of one each: a socket
 * write per command was the largest single cost of a busy worker. The first call of a tick goes out at
 * once (a lone call, as a worker at concurrency 1 makes, waits for nothing); the holding starts with the
 * second. Only for a plain connection (ioredis's `stream`); a Cluster writes as it always does.
 */
function corkUntilTick(client: RedisClient): void {
  const stream = (client as { stream?: { cork?: () => void; uncork?: () => void; writable?: boolean } }).stream
  if (!stream?.cork || !stream.uncork || !stream.writable) return
  const calls = corked.get(stream)
  if (calls === undefined) {
    corked.set(stream, 0)
    process.nextTick(() => {
      if ((corked.get(stream) ?? 0) > 0) stream.uncork?.()
      corked.delete(stream)
    })
    return
  }
  if (calls === 0 || calls + 1 >= CORK_MAX) {
    if (calls > 0) stream.uncork()
    stream.cork()
    corked.set(stream, 1)
    return
  }
  corked.set(stream, calls + 1)
}

type Flat = (...args: (string | number | (string | number)[])[]) => Promise<unknown>

export async function evalScript(client: RedisClient, file: string, keys: string[], args: (string | number)[]): Promise<unknown> {
  const script: Script = loadScript(file)
  corkUntilTick(client)
  if (keys.length < script.fixedKeys || keys.length === 0) {
    throw new EchoMQError('ERR_SCRIPT', `${script.name} needs at least ${Math.max(1, script.fixedKeys)} keys, got ${keys.length}`)
  }
  try {
    // ioredis flattens array arguments itself (its types say otherwise): no copy of keys and arguments here.
    return await (client.evalsha as Flat)(script.sha, keys.length, keys, args)
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
      return await (client.eval as Flat)(script.lua, keys.length, keys, args).catch((e: unknown) => {
        throw refusedInScript(e, script)
      })
    }
    throw refusedInScript(err, script)
  }
}

/**
 * Redis names neither the command nor the rule when an ACL refuses a command inside a script, only the
 * script's line: this names the command on that line, so the error can say what to grant.
 */
function refusedInScript(err: unknown, script: Script): unknown {
  const line =
    err instanceof Error ? /can't run this command or subcommand script: \w+, on @user_script:(\d+)/.exec(err.message)?.[1] : undefined
  if (line === undefined) return err
  const command = /(?:rcall|redis\.p?call)\(\s*'(\w+)'/.exec(script.lua.split('\n')[Number(line) - 1] ?? '')?.[1]
  if (command === undefined) return err
  ;(err as Error).message += ` (${script.name}, refused inside the script: ${command.toUpperCase()})`
  return err
}

export const jobKeyPairs = (keys: QueueKeys, ids: string[]) => ids.flatMap((id) => [keys.job(id), keys.lock(id)])
/** What a script that emits events needs: meta (the stream's cap), the stream and the listened key. */
export const eventKeys = (keys: QueueKeys) => [keys.meta, keys.events, keys.listened]
/** Where reservations and prioritized jobs are kept: what every script that takes or hands back needs. */
export const prioritizedKeys = (keys: QueueKeys) => [keys.prioritized, keys.reservedScores]

/** When the earliest delayed job falls due, by Redis's clock: what a busy worker's promoter waits for. */
export interface NextDue {
  /** ms until it is due (0: due now), undefined when no job is delayed. */
  nextDueInMs: number | undefined
  /** Its due time (ms, Redis's clock). */
  nextDueAt: number | undefined
}

export const nextDue = (inMs: number, at: number): NextDue => ({
  nextDueInMs: inMs < 0 ? undefined : inMs,
  nextDueAt: at < 0 ? undefined : at,
})

/** Per client, the scripts a transaction of its has run: its next transactions send only their hashes. */
const ranInTransaction = new WeakMap<object, Set<string>>()

/**
 * Runs one script once per call in a single MULTI: all or none (a Redis that refuses one, out of memory,
 * refuses the transaction). The first transaction of a script on a client opens with an EVAL (a
 * transaction cannot fall back from EVALSHA on NOSCRIPT midway; SCRIPT LOAD first would need a second round
 * trip for nothing), which caches the script, and its other calls are EVALSHA. Later ones are all EVALSHA,
 * not the script's text (some 16 to 50 KB) once more: on a Redis that lost the script (a restart, a
 * failover, SCRIPT FLUSH, another node of a cluster) every call of the transaction is refused alike, so
 * nothing runs, and the transaction is sent again opening with an EVAL. Resolves to each call's reply, in
 * order.
 */
export async function evalInTransaction(
  client: RedisClient,
  file: string,
  calls: { keys: string[]; args: (string | number)[] }[],
): Promise<unknown[]> {
  const script = loadScript(file)
  let ran = ranInTransaction.get(client)
  if (!ran) {
    ran = new Set()
    ranInTransaction.set(client, ran)
  }
  const cached = ran.has(script.sha)
  let replies = await transaction(client, script, calls, cached)
  if (cached && replies.every(([err]) => err instanceof Error && err.message.startsWith('NOSCRIPT'))) {
    replies = await transaction(client, script, calls, false)
  }
  ran.add(script.sha)
  return replies.map(([err, reply]) => {
    if (err) throw err
    return reply
  })
}

async function transaction(
  client: RedisClient,
  script: Script,
  calls: { keys: string[]; args: (string | number)[] }[],
  cached: boolean,
): Promise<[Error | null, unknown][]> {
  const tx = client.multi()
  for (const [i, { keys, args }] of calls.entries()) {
    if (i === 0 && !cached) tx.eval(script.lua, keys.length, ...keys, ...args)
    else tx.evalsha(script.sha, keys.length, ...keys, ...args)
  }
  let replies: [Error | null, unknown][] | null
  try {
    replies = await tx.exec()
  } catch (err) {
    // Redis refused the transaction for a command it refused when queued (out of memory): that is the cause.
    throw (err as { previousErrors?: Error[] }).previousErrors?.[0] ?? err
  }
  if (!replies) throw new EchoMQError('ERR_SCRIPT', 'the bulk add transaction was aborted')
  return replies
}
