/**
 * Loads the Lua scripts in `lua/` once per process and runs them with EVALSHA, falling back to EVAL on
 * NOSCRIPT (a restarted or failed-over Redis has an empty script cache; EVAL also re-caches it).
 * `-- @include name` lines are replaced by `lua/includes/name.lua`. Every call passes at least one key,
 * so Redis Cluster routes it to the queue's slot.
 */
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Cluster, Redis } from 'ioredis'
import { EchoMQError } from './errors.js'

export type RedisClient = Redis | Cluster

export interface Script {
  readonly name: string
  /** Number of fixed KEYS, from the file name (`verb-N.lua`); per-job keys follow them. */
  readonly fixedKeys: number
  readonly lua: string
  readonly sha: string
}

function luaDir(): string {
  const candidates = [
    process.env.ECHOMQ_LUA_DIR,
    typeof import.meta.url === 'string' ? fileURLToPath(new URL('../lua/', import.meta.url)) : undefined,
    process.env.LAMBDA_TASK_ROOT && path.join(process.env.LAMBDA_TASK_ROOT, 'lua'),
    path.join(process.cwd(), 'lua'),
  ]
  for (const dir of candidates) if (dir && existsSync(path.join(dir, 'sweep-5.lua'))) return dir
  throw new EchoMQError('ERR_SCRIPT', `cannot find EchoMQ's lua/ directory (looked in ${candidates.filter(Boolean).join(', ')}); set ECHOMQ_LUA_DIR`)
}

let dir: string | undefined
const cache = new Map<string, Script>()
let wrap: ((lua: string) => string) | undefined

/**
 * Test hook: rewrites every script's source before it is hashed and run (the key guard in the tests uses
 * it to fail any redis.call on a key not passed in KEYS). Clears the cache; pass undefined to remove it.
 */
export function setScriptWrapper(fn: ((lua: string) => string) | undefined): void {
  wrap = fn
  cache.clear()
}

export function loadScript(file: string): Script {
  const cached = cache.get(file)
  if (cached) return cached
  dir ??= luaDir()
  const match = /^([A-Za-z]+)-(\d+)\.lua$/.exec(file)
  if (!match?.[1] || !match[2]) throw new EchoMQError('ERR_SCRIPT', `script file ${file} is not named verb-N.lua`)
  const root = dir
  const source = readFileSync(path.join(root, file), 'utf8').replace(/^-- @include (\w+)\s*$/gm, (_, name: string) =>
    readFileSync(path.join(root, 'includes', `${name}.lua`), 'utf8'),
  )
  const lua = wrap ? wrap(source) : source
  const script = { name: match[1], fixedKeys: Number(match[2]), lua, sha: createHash('sha1').update(lua).digest('hex') }
  cache.set(file, script)
  return script
}

export async function runScript(client: RedisClient, script: Script, keys: string[], args: (string | number)[]): Promise<unknown> {
  if (keys.length < script.fixedKeys || keys.length === 0) {
    throw new EchoMQError('ERR_SCRIPT', `${script.name} needs at least ${Math.max(1, script.fixedKeys)} keys, got ${keys.length}`)
  }
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args)
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
      return await client.eval(script.lua, keys.length, ...keys, ...args)
    }
    throw err
  }
}

export const scripts = {
  add: () => loadScript('add-3.lua'),
  take: () => loadScript('take-3.lua'),
  extend: () => loadScript('extend-2.lua'),
  reclaim: () => loadScript('reclaim-2.lua'),
  finish: () => loadScript('finish-8.lua'),
  sweep: () => loadScript('sweep-5.lua'),
}
