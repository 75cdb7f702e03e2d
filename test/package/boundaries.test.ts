/**
 * The module boundaries, checked on the source: lib/redis/ is the one Redis boundary (script-runner.ts runs and
 * loads the scripts, queries.ts sends the plain commands, keys.ts spells the keys), and everything else in
 * the library, the commands and the handler calls their functions; lib/reaper/ is the only part of lib/
 * that imports an AWS package, and the library's entry pulls in none.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../..', import.meta.url))

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir)).flatMap((name) => {
    const rel = path.join(dir, name)
    if (statSync(path.join(root, rel)).isDirectory()) return sources(rel)
    return /\.(ts|js|cjs|lua)$/.test(name) ? [rel] : []
  })
}

const files = ['lib', 'cli', 'functions', 'bench', 'test', 'bin'].flatMap(sources)
const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8')
/** What a reader is pointed at: the README, ARCHITECTURE.md and every page of docs/. */
const documents = [
  'README.md',
  'ARCHITECTURE.md',
  ...readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]
/** A script call through an ioredis method or a raw command. */
const SCRIPT_CALL = /\.(evalsha|eval|fcall)\(|\.(call|send_command|sendCommand)\(\s*['"](evalsha|eval|fcall)['"]/i

describe('one module runs the scripts', () => {
  it('finds the sources it checks', () => {
    expect(files).toContain(path.join('lib', 'redis', 'commands.ts'))
    expect(files.length).toBeGreaterThan(40)
  })

  it('no module but lib/redis/script-runner.ts imports the script loader', () => {
    const importers = files.filter((f) => /from ['"][./]*(lib\/)?scripts\.js['"]/.test(read(f)))
    expect(importers).toEqual([path.join('lib', 'redis', 'script-runner.ts')])
  })

  it('no module but lib/redis/script-runner.ts sends EVALSHA, EVAL or FCALL', () => {
    // The key guard's own tests run made-up probe scripts straight through the client, on purpose.
    const allowed = [
      path.join('lib', 'redis', 'script-runner.ts'),
      path.join('test', 'redis', 'key-guard.test.ts'),
      path.join('test', 'package', 'boundaries.test.ts'),
    ]
    const callers = files.filter((f) => !allowed.includes(f) && SCRIPT_CALL.test(read(f)))
    expect(callers).toEqual([])
  })
})

/** Commands that name no key (the connection's own, the server's). */
const KEYLESS = new Set(['ping', 'quit', 'info', 'script', 'client', 'config', 'hello', 'acl', 'cluster', 'select', 'discard'])
const COMMANDS = (Redis.prototype as unknown as { getBuiltinCommands(): string[] }).getBuiltinCommands().filter((c) => !KEYLESS.has(c))
/** A Redis command sent through a client (`client.zrange(`, `this.blocking.bzpopmin(`, `node.scan(`...). */
const REDIS_CALL = new RegExp(`\\b(?:client|blocking|node|redis)\\s*\\.\\s*(${COMMANDS.join('|')}|multi|pipeline)\\s*\\(`, 'i')

describe('one Redis boundary', () => {
  it('no module of the library, the commands or the handler outside lib/redis/ sends a command on a key', () => {
    // The race demo's checker is the naive one the design document contrasts with the sweep: separate
    // round trips on purpose, to show the double recovery they allow.
    const allowed = [path.join('cli', 'scenes', 'race.ts')]
    const senders = files
      .filter((f) => /^(lib|cli|functions)\//.test(f) && !f.startsWith(path.join('lib', 'redis')) && !allowed.includes(f))
      .filter((f) => REDIS_CALL.test(read(f)))
    expect(senders).toEqual([])
  })

  it('in lib/, only the reaper and the worker handler (lib/reaper/, lib/lambda/) read the environment', () => {
    const readers = files.filter((f) => f.startsWith(`lib${path.sep}`) && /\bprocess\.env\b/.test(read(f)))
    expect(readers.length).toBeGreaterThan(0)
    expect(readers.filter((f) => !f.startsWith(path.join('lib', 'reaper')) && !f.startsWith(path.join('lib', 'lambda')))).toEqual([])
  })

  it('only lib/reaper/ imports an AWS package; lib/index.ts reaches none', () => {
    const aws = /from ['"]@aws-sdk\/|from ['"]@aws-lambda-powertools\/|from ['"]aws-lambda['"]/
    const importers = files.filter((f) => f.startsWith(`lib${path.sep}`) && !f.startsWith(path.join('lib', 'reaper')) && aws.test(read(f)))
    expect(importers).toEqual([])
    // What the public entry imports, followed through lib/: never into lib/reaper/.
    const seen = new Set<string>()
    const visit = (rel: string) => {
      if (seen.has(rel)) return
      seen.add(rel)
      for (const [, spec] of read(rel).matchAll(/from ['"](\.{1,2}\/[^'"]+)['"]/g)) {
        const target = path.normalize(path.join(path.dirname(rel), (spec as string).replace(/\.js$/, '.ts')))
        if (target.endsWith('.ts')) visit(target)
      }
    }
    visit(path.join('lib', 'index.ts'))
    expect([...seen].filter((f) => f.startsWith(path.join('lib', 'reaper')))).toEqual([])
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

  it('no line in lib/, functions/ or cli/ is over 150 characters', () => {
    const long = files
      .filter((f) => /^(lib|cli|functions)\//.test(f))
      .flatMap((f) =>
        read(f)
          .split('\n')
          .flatMap((line, i) => (line.length > 150 ? [`${f}:${i + 1} (${line.length})`] : [])),
      )
    expect(long).toEqual([])
  })

  it('every file the README, ARCHITECTURE.md and the pages of docs/ name exists', () => {
    const named = documents.flatMap((doc) =>
      [
        ...read(doc).matchAll(
          /\b((?:lib|cli|functions|test|bench|lua|serverless|scripts|examples|docs)\/[\w./-]*\.(?:ts|lua|json|cjs|mjs|md|png))\b/g,
        ),
      ].map((m) => m[1] as string),
    )
    expect(named.length).toBeGreaterThan(20)
    expect([...new Set(named)].filter((f) => !existsSync(path.join(root, f)))).toEqual([])
  })

  it('every script a comment names exists, and its name counts the KEYS its header lists', () => {
    const scripts = new Set(readdirSync(path.join(root, 'lua')).filter((f) => f.endsWith('.lua')))
    const texts = [...files, ...sources('lua'), ...documents]
    const named = texts.flatMap((f) => [...read(f).matchAll(/\b([a-z][a-zA-Z]*-\d+\.lua)\b/g)].map((m) => `${f}: ${m[1]}`))
    expect(named.filter((n) => !scripts.has(n.split(': ')[1] as string))).toEqual([])
    for (const script of scripts) {
      const declared = Number(/-(\d+)\.lua$/.exec(script)?.[1])
      const header = read(path.join('lua', script)).split(']]')[0] as string
      const keys = new Set([...header.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1])))
      // A variable tail (KEYS[11 + 3i]) is the jobs' keys, beyond the fixed count the name gives.
      expect({ script, keys: Math.max(...keys) }).toEqual({ script, keys: declared })
    }
  })
})

describe("ARCHITECTURE.md's map of the parts", () => {
  it('names in its first column only files and folders that exist (indented: under lib/), and all of lib/', () => {
    const map = /## The parts\n\n```\n([\s\S]*?)```/.exec(read('ARCHITECTURE.md'))?.[1] ?? ''
    const named = map.split('\n').flatMap((line) => {
      const entry = /^( {0,2})(\S+(?: \S+)*?)(?: {2,}|$)/.exec(line)
      if (!entry || line.startsWith('   ')) return []
      const base = entry[1] ? 'lib' : ''
      return (entry[2] as string)
        .split(' ')
        .filter((word) => word !== '→')
        .map((word) => path.join(base, word))
    })
    expect(named.length).toBeGreaterThan(20)
    expect(named.filter((f) => !existsSync(path.join(root, f)))).toEqual([])
    // And the converse: every file and folder of lib/ is on the map.
    const unnamed = readdirSync(path.join(root, 'lib')).filter(
      (name) => !map.includes(statSync(path.join(root, 'lib', name)).isDirectory() ? `${name}/` : name),
    )
    expect(unnamed).toEqual([])
  })
})

describe('the tests', () => {
  it('mirror the source folders: every test file sits in one folder of test/ named for what it tests', () => {
    // port/: BullMQ's own tests, ported, run on BullMQ and on EchoMQ through test/port/adapter.ts (issue 30)
    const folders = ['redis', 'worker', 'queue', 'schedulers', 'reaper', 'dashboard', 'cli', 'lambda', 'package', 'chaos', 'flows', 'port']
    const tests = files.filter((f) => f.startsWith(`test${path.sep}`) && f.endsWith('.test.ts'))
    expect(tests.length).toBeGreaterThan(80)
    expect(tests.filter((f) => !folders.includes(f.split(path.sep)[1] as string) || f.split(path.sep).length !== 3)).toEqual([])
  })

  it('import what they share with the CLI (cli/support/) only through test/helpers/', () => {
    const importers = files.filter(
      (f) => f.startsWith(`test${path.sep}`) && !f.startsWith(path.join('test', 'helpers')) && /from ['"][./]*cli\/support\//.test(read(f)),
    )
    expect(importers).toEqual([])
  })

  it('make their queues and workers through the fixture (test/helpers/fixture.ts) or say why not (`// direct: <why>`)', () => {
    // A construction (`new Queue(`, `new Worker<Data>(`) outside the fixture, on its line or under a mark.
    const unexplained = files
      .filter((f) => f.startsWith(`test${path.sep}`) && f !== path.join('test', 'helpers', 'fixture.ts') && f.endsWith('.ts'))
      .flatMap((f) =>
        read(f)
          .split('\n')
          .flatMap((line, i, lines) =>
            /\bnew (Queue|Worker)\s*[<(]/.test(line) && !/\/\/ direct: \S/.test(`${lines[i - 1]} ${line}`) ? [`${f}:${i + 1}`] : [],
          ),
      )
    expect(unexplained).toEqual([])
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
