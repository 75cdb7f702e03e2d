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

/** The scripts a client's Redis has run (so holds in its cache), by their sha: set after a call succeeds. */
const cached = new WeakMap<object, Set<string>>()

const isNoScript = (err: Error | null) => err instanceof Error && err.message.startsWith('NOSCRIPT')

/**
 * Runs one script once per call in a single MULTI: all or none (a Redis that refuses one, out of memory,
 * refuses the transaction). A transaction cannot fall back from EVALSHA on NOSCRIPT midway, so the first
 * call is an EVAL (which caches the script; the calls after it are EVALSHA: each EVAL would carry the
 * script's text again and have Redis hash it again) until this client has seen the script run; then every
 * call is an EVALSHA, and the script's text (some 15 kB for add-7.lua) is not sent again. A Redis that
 * lost its cache since (a restart, SCRIPT FLUSH) answers NOSCRIPT to every call of the transaction, none
 * having run (nothing can load the script between them), and the transaction is sent again with an EVAL
 * first. Resolves to each call's reply, in order.
 */
export async function evalInTransaction(
  client: RedisClient,
  file: string,
  calls: { keys: string[]; args: (string | number)[] }[],
): Promise<unknown[]> {
  const script = loadScript(file)
  const shas = cached.get(client) ?? new Set<string>()
  cached.set(client, shas)
  const known = shas.has(script.sha)
  let replies = await transaction(client, script, calls, !known)
  if (known && replies.every(([err]) => isNoScript(err))) replies = await transaction(client, script, calls, true)
  const out = replies.map(([err, reply]) => {
    if (err) throw err
    return reply
  })
  shas.add(script.sha)
  return out
}

async function transaction(
  client: RedisClient,
  script: Script,
  calls: { keys: string[]; args: (string | number)[] }[],
  evalFirst: boolean,
): Promise<[Error | null, unknown][]> {
  const tx = client.multi()
  for (const [i, { keys, args }] of calls.entries()) {
    if (i === 0 && evalFirst) tx.eval(script.lua, keys.length, ...keys, ...args)
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

/** A flat list of pairs ([id, entry, id, entry...]) as tuples. */
export function pairs(flat: string[]): [string, string][] {
  const out: [string, string][] = []
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i] as string, flat[i + 1] as string])
  return out
}
