/**
 * The module boundaries, checked on the source: lib/redis/commands.ts is the only module that runs a script or
 * loads one (everything else calls its functions), and lib/redis/keys.ts is the only module that spells a key.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('..', import.meta.url))

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir)).flatMap((name) => {
    const rel = path.join(dir, name)
    if (statSync(path.join(root, rel)).isDirectory()) return sources(rel)
    return /\.(ts|js|cjs|lua)$/.test(name) ? [rel] : []
  })
}

const files = ['lib', 'cli', 'functions', 'bench', 'test', 'bin'].flatMap(sources)
const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8')
/** A script call through an ioredis method or a raw command. */
const SCRIPT_CALL = /\.(evalsha|eval|fcall)\(|\.(call|send_command|sendCommand)\(\s*['"](evalsha|eval|fcall)['"]/i

describe('one module runs the scripts', () => {
  it('finds the sources it checks', () => {
    expect(files).toContain(path.join('lib', 'redis', 'commands.ts'))
    expect(files.length).toBeGreaterThan(40)
  })

  it('no module but lib/redis/commands.ts imports the script loader', () => {
    const importers = files.filter((f) => /from ['"][./]*(lib\/)?scripts\.js['"]/.test(read(f)))
    expect(importers).toEqual([path.join('lib', 'redis', 'commands.ts')])
  })

  it('no module but lib/redis/commands.ts sends EVALSHA, EVAL or FCALL', () => {
    // The key guard's own tests run made-up probe scripts straight through the client, on purpose.
    const allowed = [
      path.join('lib', 'redis', 'commands.ts'),
      path.join('test', 'key-guard.test.ts'),
      path.join('test', 'boundaries.test.ts'),
    ]
    const callers = files.filter((f) => !allowed.includes(f) && SCRIPT_CALL.test(read(f)))
    expect(callers).toEqual([])
  })
})

describe('habits', () => {
  it('no line of code, Lua or template reaches 200 characters', () => {
    const texts = [...files, ...sources('lua'), 'serverless.yml']
    const long = texts.flatMap((f) =>
      read(f)
        .split('\n')
        .flatMap((line, i) => (line.length >= 200 ? [`${f}:${i + 1} (${line.length})`] : [])),
    )
    expect(long).toEqual([])
  })
})

describe('one module spells the keys', () => {
  it("no library, command or handler module builds a queue key ('<prefix>:{queue}:...') itself", () => {
    const spellers = files
      .filter((f) => /^(lib|cli|functions)\//.test(f) && f !== path.join('lib', 'redis', 'keys.ts'))
      .filter((f) => /\$\{[^}]*\}:\{|:\{\$\{|['"`]:lock['"`]/.test(read(f)))
    expect(spellers).toEqual([])
  })
})
