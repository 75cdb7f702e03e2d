/**
 * The package as a user gets it. `npm pack` (its prepack builds dist/), publint and arethetypeswrong on the
 * tarball; then fresh consumer projects that install the tarball with `--omit=dev`, as a library user does:
 * the packages they get (none of the deploy project's: no AWS SDK, Powertools, esbuild, browser automation,
 * tsx, typescript or vitest), an ES module and a CommonJS program run with plain `node` against a real
 * redis-server, the `echomq` command, a worker bundled by esbuild, and the declarations type-checked under a
 * consumer's strictest settings with node16/nodenext and bundler resolution, ESM and CommonJS.
 *
 * Run by `npm run test:package` (vitest.package.config.ts), a step of its own in .ci/run.
 *
 * Every entry of package.json's `exports` is checked from there, so a new entry (`echomq/lambda`) is covered
 * by the tarball, publint, arethetypeswrong and the import/require checks once it is listed.
 */
import { execFile } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startRedis, type TestRedis } from '../helpers/redis-server.js'

const exec = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url))
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  name: string
  exports: Record<string, unknown>
  devDependencies: Record<string, string>
}
/** What a library user must never get from `npm install echomq`. */
const FORBIDDEN = /^(@aws-sdk\/|@aws-lambda-powertools\/|@smithy\/|esbuild$|@esbuild\/|playwright|tsx$|typescript$|vitest$|@vitest\/|osls$)/
/** The entries a user imports: every key of `exports` but package.json. */
const ENTRIES = Object.keys(pkg.exports)
  .filter((key) => key !== './package.json')
  .map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`))
const INSTALL_MS = 240_000
const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }

function run(cmd: string, args: string[], cwd: string, env: Record<string, string | undefined> = npmEnv, timeout = 60_000) {
  return exec(cmd, args, { cwd, env, timeout, maxBuffer: 32 * 1024 * 1024 })
}

/** Runs and resolves to the exit code and output, without throwing on a non-zero exit. */
async function outcome(cmd: string, args: string[], cwd: string, env: Record<string, string | undefined>, timeout = 60_000) {
  try {
    const { stdout, stderr } = await run(cmd, args, cwd, env, timeout)
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number | string; stdout?: string; stderr?: string }
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

/** Every package under a project's node_modules, nested ones too, as `name@version`. */
function installedPackages(dir: string): string[] {
  const found: string[] = []
  const walk = (modules: string) => {
    if (!existsSync(modules)) return
    for (const name of readdirSync(modules)) {
      if (name.startsWith('.')) continue
      const at = path.join(modules, name)
      if (name.startsWith('@')) {
        for (const scoped of readdirSync(at)) visit(path.join(at, scoped), `${name}/${scoped}`)
      } else visit(at, name)
    }
  }
  const visit = (at: string, name: string) => {
    const manifest = path.join(at, 'package.json')
    if (existsSync(manifest)) found.push(`${name}@${(JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version}`)
    walk(path.join(at, 'node_modules'))
  }
  walk(path.join(dir, 'node_modules'))
  return found.sort()
}

function sizeOf(at: string): number {
  const stat = statSync(at)
  if (!stat.isDirectory()) return stat.size
  return readdirSync(at).reduce((sum, name) => sum + sizeOf(path.join(at, name)), 0)
}

/** A fresh project (`type` module or commonjs) with the tarball installed as a library user installs it. */
async function consumerProject(work: string, name: string, type: 'module' | 'commonjs', tarball: string) {
  const dir = path.join(work, name)
  mkdirSync(dir)
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, private: true, type }))
  await run('npm', ['install', tarball, '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], dir, npmEnv, INSTALL_MS)
  return { dir, packages: installedPackages(dir), bytes: sizeOf(path.join(dir, 'node_modules')) }
}

describe('the packed tarball, installed into fresh projects', () => {
  let work: string
  let tarball: string
  let files: string[]
  let redis: TestRedis
  let esm: Awaited<ReturnType<typeof consumerProject>>
  let cjs: Awaited<ReturnType<typeof consumerProject>>
  const nodeEnv = () => ({ PATH: process.env.PATH, HOME: work, REDIS_URL: redis.url })

  beforeAll(
    async () => {
      work = mkdtempSync(path.join(tmpdir(), 'echomq-package-'))
      const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], root, npmEnv, INSTALL_MS)
      const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[]
      if (!packed) throw new Error(`npm pack printed no tarball: ${stdout}`)
      tarball = path.join(work, packed.filename)
      files = packed.files.map((f) => f.path)
      redis = await startRedis()
      esm = await consumerProject(work, 'consumer-esm', 'module', tarball)
      cjs = await consumerProject(work, 'consumer-cjs', 'commonjs', tarball)
    },
    2 * INSTALL_MS + 60_000,
  )

  afterAll(async () => {
    await redis?.stop()
    if (work) rmSync(work, { recursive: true, force: true })
  })

  it('holds the built JavaScript, declarations with their maps and sources, the command; no tests, bench or fixtures', () => {
    for (const f of [
      'dist/lib/index.js',
      'dist/lib/index.d.ts',
      'dist/lib/index.d.ts.map',
      'lib/index.ts',
      'dist/cli/main.js',
      'bin/echomq.js',
    ])
      expect(files).toContain(f)
    expect(files).toContain('dist/lib/defaults.json')
    expect(
      files.filter((f) => /^(test|bench|functions|serverless|scripts|cli|lua|docs)\/|\.test\.|\.tgz$|^\.|\/fixtures\//.test(f)),
    ).toEqual([])
    expect(files.filter((f) => f.startsWith('dist/cli/') && !f.endsWith('.js'))).toEqual([])
    // The Lua scripts are in the JavaScript: every file of lua/, byte for byte.
    const built = readFileSync(path.join(esm.dir, 'node_modules/echomq/dist/lib/redis/lua-files.js'), 'utf8')
    const sweep = readFileSync(path.join(root, 'lua/sweep-10.lua'), 'utf8')
    expect(built).toContain(JSON.stringify(sweep).slice(1, -1))
  })

  it('publint and arethetypeswrong (ESM-only profile) find no problem in it', async () => {
    const publint = await outcome(
      process.execPath,
      [path.join(root, 'node_modules/publint/src/cli.js'), 'run', tarball, '--strict'],
      work,
      npmEnv,
    )
    expect(publint, publint.stdout + publint.stderr).toMatchObject({ code: 0 })
    const attw = await outcome(
      process.execPath,
      [path.join(root, 'node_modules/@arethetypeswrong/cli/dist/index.js'), tarball, '--profile', 'esm-only', '--format', 'table-flipped'],
      work,
      npmEnv,
    )
    expect(attw, attw.stdout + attw.stderr).toMatchObject({ code: 0 })
  })

  it('a library install brings the library and its two dependencies, nothing of the deploy project', () => {
    for (const project of [esm, cjs]) {
      expect(project.packages.filter((p) => FORBIDDEN.test(p.slice(0, p.lastIndexOf('@'))))).toEqual([])
      expect(project.packages.map((p) => p.slice(0, p.lastIndexOf('@')))).toEqual(
        expect.arrayContaining(['echomq', 'ioredis', 'cron-parser']),
      )
    }
    // The figure for the README's Install section (the whole node_modules, echomq included).
    console.info(`package: ${files.length} files; install: ${esm.packages.length} packages, ${(esm.bytes / 1e6).toFixed(1)} MB`)
    expect(esm.bytes).toBeLessThan(15e6)
  })

  /** The modules `entry` (under dist/lib) loads statically, and the packages they import. */
  const staticImports = (entry: string) => {
    const dist = path.join(esm.dir, 'node_modules/echomq/dist/lib')
    const seen = new Set<string>()
    const bare = new Set<string>()
    const visit = (file: string) => {
      if (seen.has(file)) return
      seen.add(file)
      // Static imports and re-exports only: what loads with the module, before any code of it runs.
      for (const [, spec] of readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/gm)) {
        if (!spec) continue
        if (spec.startsWith('.')) {
          const target = path.resolve(path.dirname(file), spec)
          if (target.endsWith('.js')) visit(target)
        } else bare.add(spec.startsWith('node:') ? 'node:' : (spec.split('/')[0] as string))
      }
    }
    visit(path.join(dist, entry))
    return { modules: [...seen].map((f) => path.relative(dist, f)), bare }
  }

  it("import 'echomq' loads no dashboard, no reaper, and no package but ioredis and cron-parser", () => {
    const { modules, bare } = staticImports('index.js')
    expect(modules.length).toBeGreaterThan(20)
    expect(modules.filter((m) => m.startsWith('ui') || m.startsWith('reaper'))).toEqual([])
    expect([...bare].sort()).toEqual(['cron-parser', 'ioredis', 'node:'])
  })

  it("import 'echomq/lambda' loads no AWS package (SSM's are loaded only for REDIS_URL_PARAMETER) and no dashboard", () => {
    const { modules, bare } = staticImports('lambda/index.js')
    expect(modules.filter((m) => m.startsWith('ui') || (m.startsWith('reaper') && m !== 'reaper/peers.js'))).toEqual([])
    expect([...bare].sort()).toEqual(['cron-parser', 'ioredis', 'node:'])
  })

  it('an ES module consumer runs a job, a sweep and the dashboard with plain node; the reaper names its missing packages', async () => {
    copyFileSync(path.join(fixtures, 'esm-app.mjs'), path.join(esm.dir, 'app.mjs'))
    const { stdout } = await run(process.execPath, ['app.mjs'], esm.dir, nodeEnv())
    const seen = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}')
    expect(seen).toMatchObject({ result: 42, swept: { marked: [], recovered: [], failed: [] }, refused: 'ERR_JOB_NAME' })
    expect(seen).toMatchObject({ dashboardStatus: 200, dashboardNamesQueue: true })
    expect(seen.workerFunction).toEqual({ processed: 2, completed: 2, reason: 'drained' })
    expect(seen.reaperError.code).toBe('ERR_CONFIG')
    for (const peer of seen.peers as string[]) {
      expect(seen.reaperError.message).toContain(peer)
      expect(seen.reaperError.hint).toContain(peer)
    }
  })

  it('a CommonJS consumer require()s every entry (require of an ES module, Node >= 20.19) and runs a job', async () => {
    copyFileSync(path.join(fixtures, 'cjs-app.cjs'), path.join(cjs.dir, 'app.js'))
    const { stdout } = await run(process.execPath, ['app.js'], cjs.dir, nodeEnv())
    expect(JSON.parse(stdout.trim())).toEqual({
      result: 42,
      errorClass: 'function',
      createDashboard: 'function',
      createHandler: 'function',
      createWorkerHandler: 'function',
    })
    // Every entry of the exports map, imported and required.
    const list = JSON.stringify(ENTRIES)
    const required = await run(
      process.execPath,
      ['-e', `for (const e of ${list}) console.log(e, Object.keys(require(e)).length)`],
      cjs.dir,
      nodeEnv(),
    )
    const imported = await run(
      process.execPath,
      ['--input-type=module', '-e', `for (const e of ${list}) console.log(e, Object.keys(await import(e)).length)`],
      esm.dir,
      nodeEnv(),
    )
    expect(required.stdout).toBe(imported.stdout)
    expect(required.stdout.trim().split('\n')).toHaveLength(ENTRIES.length)
    expect(required.stdout).not.toMatch(/ 0$/m)
  })

  it('the echomq command runs the built JavaScript with plain node; sweep needs AWS packages only for metrics through the API', async () => {
    const bin = path.join(esm.dir, 'node_modules/.bin/echomq')
    const stats = await outcome(bin, ['stats', '--json', '--redis-url', redis.url], esm.dir, nodeEnv())
    expect(stats, stats.stderr).toMatchObject({ code: 0 })
    expect(JSON.parse(stats.stdout)).toBeTypeOf('object')
    // A sweep (metrics off by default) needs no AWS package; metrics through the API name the one they lack.
    const sweep = await outcome(bin, ['sweep', '--redis-url', redis.url], esm.dir, nodeEnv())
    expect(sweep, sweep.stderr).toMatchObject({ code: 0 })
    const api = await outcome(bin, ['sweep', '--metrics', 'api', '--redis-url', redis.url], esm.dir, nodeEnv())
    expect(api.code).toBe(1)
    expect(api.stderr).toContain('@aws-sdk/client-cloudwatch')
    expect(api.stderr).toContain('npm install')
    // A Redis URL from SSM needs the two packages that read it, and the message names those only.
    const ssm = await outcome(bin, ['sweep'], esm.dir, { ...nodeEnv(), REDIS_URL: undefined, REDIS_URL_PARAMETER: '/echomq/redis-url' })
    expect(ssm.code).toBe(1)
    expect(ssm.stderr).toMatch(/reading REDIS_URL_PARAMETER needs @aws-lambda-powertools\/parameters, @aws-sdk\/client-ssm, not installed/)
    expect(ssm.stderr).not.toMatch(/logger|cloudwatch/)
    // The demo forks worker processes from the built JavaScript too, and starts its own redis-server.
    const demo = await outcome(bin, ['demo', '--jobs', '1'], esm.dir, { PATH: process.env.PATH, HOME: work }, 120_000)
    expect(demo, demo.stderr).toMatchObject({ code: 0 })
    expect(demo.stdout).toContain('recovered to wait')
  }, 180_000)

  it('a worker bundled by esbuild runs from a directory without node_modules (the Lua is in the JavaScript)', async () => {
    const { build } = await import('esbuild')
    const out = path.join(work, 'bundled', 'worker.cjs')
    copyFileSync(path.join(fixtures, 'bundle-app.mjs'), path.join(esm.dir, 'bundle-app.mjs'))
    await build({
      entryPoints: [path.join(esm.dir, 'bundle-app.mjs')],
      bundle: true,
      platform: 'node',
      format: 'cjs',
      outfile: out,
      logLevel: 'error',
    })
    const { stdout } = await run(process.execPath, [out], path.dirname(out), nodeEnv())
    expect(JSON.parse(stdout.trim())).toEqual({ result: 42 })
  })

  describe('a TypeScript consumer type-checks with strict settings and skipLibCheck false', () => {
    const strict = {
      strict: true,
      exactOptionalPropertyTypes: true,
      noPropertyAccessFromIndexSignature: true,
      noUncheckedIndexedAccess: true,
      noImplicitOverride: true,
      skipLibCheck: false,
      noEmit: true,
      target: 'ES2022',
      lib: ['ES2022'],
      types: ['node'],
    }
    const tsc = path.join(root, 'node_modules/typescript/bin/tsc')

    beforeAll(async () => {
      // A TypeScript user has Node's types, as for ioredis; the same version as this repository's.
      for (const dir of [esm.dir, cjs.dir])
        await run(
          'npm',
          ['install', '-D', `@types/node@${pkg.devDependencies['@types/node']}`, '--prefer-offline'],
          dir,
          npmEnv,
          INSTALL_MS,
        )
    }, 2 * INSTALL_MS)

    const cases: [string, 'esm' | 'cjs', Record<string, string>][] = [
      ['ESM, nodenext', 'esm', { module: 'nodenext', moduleResolution: 'nodenext' }],
      ['ESM, node16', 'esm', { module: 'node16', moduleResolution: 'node16' }],
      ['ESM, bundler', 'esm', { module: 'esnext', moduleResolution: 'bundler' }],
      ['CommonJS, nodenext (require of ESM, TypeScript >= 5.8)', 'cjs', { module: 'nodenext', moduleResolution: 'nodenext' }],
    ]
    it.each(cases)(
      '%s',
      async (label, kind, resolution) => {
        const dir = (kind === 'esm' ? esm : cjs).dir
        const name = `tsconfig.${label.replace(/\W+/g, '-')}.json`
        copyFileSync(path.join(fixtures, 'consumer.ts'), path.join(dir, 'consumer.ts'))
        writeFileSync(path.join(dir, name), JSON.stringify({ compilerOptions: { ...strict, ...resolution }, files: ['consumer.ts'] }))
        const checked = await outcome(process.execPath, [tsc, '-p', name], dir, npmEnv, 300_000)
        expect(checked, checked.stdout).toMatchObject({ code: 0 })
      },
      150_000,
    )
  })
})
