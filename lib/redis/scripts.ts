/**
 * Loads the Lua scripts in `lua/` once per process: `-- @include name` lines are replaced by
 * `lua/includes/name.lua`, the job defaults are declared after the header (job-codec.ts luaDefaults), and
 * the result is hashed for EVALSHA. The files' text comes from lua-files.ts (read beside the sources in
 * the repository, built into the JavaScript in the package). Loading only: scripts are run by
 * lib/redis/commands.ts, the one module that calls them.
 */
import { createHash } from 'node:crypto'
import { EchoMQError } from '../errors.js'
import { luaDefaults } from './job-codec.js'
import { luaFile } from './lua-files.js'

export interface Script {
  readonly name: string
  /** Number of fixed KEYS, from the file name (`verb-N.lua`); per-job keys follow them. */
  readonly fixedKeys: number
  readonly lua: string
  readonly sha: string
}

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

/** A script's source as it is run, before any test wrapper: its includes spliced in, the defaults declared. */
export function scriptSource(file: string): string {
  // An include may be indented: inside a function, its functions are made only when that function runs.
  const body = luaFile(file).replace(/^[ \t]*-- @include (\w+)\s*$/gm, (_, name: string) => luaFile(`includes/${name}.lua`))
  // The comments stay in the files: Redis gets the code. They were two fifths of each script's text, which a
  // fresh server receives, hashes and parses once per script (a few thousand instructions per job of a
  // 10,000-job run). The first line names the file, for SCRIPT and error messages.
  // An include not spliced in would go with the comments below, silently.
  if (/^[ \t]*-- @include/m.test(body)) throw new EchoMQError('ERR_SCRIPT', `script file ${file} has an include that is not resolved`)
  const headerEnd = body.startsWith('--[[') ? body.indexOf(']]') + 3 : 0
  const code = body
    .slice(headerEnd)
    .split('\n')
    .filter((line) => !COMMENT_LINE.test(line))
    .join('\n')
  return `-- ${file}\n${luaDefaults()}${code}`
}

/** A line that is only a comment (the files open no block comment after their header). */
const COMMENT_LINE = /^\s*--/

export function loadScript(file: string): Script {
  const cached = cache.get(file)
  if (cached) return cached
  const match = /^([A-Za-z]+)-(\d+)\.lua$/.exec(file)
  if (!match?.[1] || !match[2]) throw new EchoMQError('ERR_SCRIPT', `script file ${file} is not named verb-N.lua`)
  const source = scriptSource(file)
  const lua = wrap ? wrap(source) : source
  const script = { name: match[1], fixedKeys: Number(match[2]), lua, sha: createHash('sha1').update(lua).digest('hex') }
  cache.set(file, script)
  return script
}
