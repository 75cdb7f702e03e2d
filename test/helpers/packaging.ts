/**
 * `npm run package` offline, as on a fresh clone: no AWS variable, an empty HOME (no ~/.aws), and copies of
 * what it wrote. Every run shares the repository's .esbuild/ and .serverless/ (`npm run package` starts by
 * deleting .esbuild/), so runs from different test files take turns: a lock directory beside the system's
 * temporary files, taken with mkdir (atomic) and freed when its holder ends, or found dead.
 */
import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)
export const root = new URL('../..', import.meta.url).pathname
/** What a deployer may have exported; none of it may reach a template. */
export const LEAKED_PASSWORD = 'deploy-time-pw'
export const offlineEnv = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_'))),
  HOME: mkdtempSync(path.join(tmpdir(), 'echomq-home-')),
  REDIS_URL: `rediss://deployer:${LEAKED_PASSWORD}@prod.example.com:6379`,
  SLS_TELEMETRY_DISABLED: '1',
  SLS_NOTIFICATIONS_MODE: 'off',
}

export type Resource = { Type: string; Properties: Record<string, unknown>; Condition?: string }
export interface Packaged {
  output: string
  /** A copy of the update-stack template, for cfn-lint. */
  template: string
  /** A copy of the zip, kept after later runs overwrite .serverless/. */
  zip: string
  /** Every file osls wrote that is deployed or kept as state, as text. */
  texts: string
  resources: Record<string, Resource>
  conditions: Record<string, unknown>
  outputs: Record<string, unknown>
}

const LOCK = path.join(tmpdir(), `echomq-package-${root.replace(/[^\w]/g, '_')}.lock`)
const LOCK_WAIT_MS = 600_000

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

function holderAlive(): boolean {
  try {
    const pid = Number(readFileSync(path.join(LOCK, 'pid'), 'utf8'))
    return pid > 0 ? alive(pid) : Date.now() - statSync(LOCK).mtimeMs < 60_000
  } catch {
    // No pid yet (just taken), or the lock was freed meanwhile: try again.
    return true
  }
}

/** Runs `fn` holding the packaging lock; waits for it at most LOCK_WAIT_MS. */
async function withPackagingLock<T>(fn: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + LOCK_WAIT_MS
  for (;;) {
    try {
      mkdirSync(LOCK)
      writeFileSync(path.join(LOCK, 'pid'), String(process.pid))
      break
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      // A holder that died with the lock (a killed test run) frees it; one still writing its pid is alive,
      // unless the lock has stayed without a pid for a minute.
      if (!holderAlive()) rmSync(LOCK, { recursive: true, force: true })
      else if (performance.now() > deadline) throw new Error(`packaging: ${LOCK} held by another run for over ${LOCK_WAIT_MS} ms`)
      else await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
  try {
    return await fn()
  } finally {
    rmSync(LOCK, { recursive: true, force: true })
  }
}

export function packageWith(args: string[]): Promise<Packaged> {
  return withPackagingLock(async () => {
    const { stdout, stderr } = await run('npm', ['run', 'package', '--', ...args], { cwd: root, env: offlineEnv, timeout: 240_000 })
    const read = (file: string) => readFileSync(`${root}.serverless/${file}`, 'utf8')
    const template = JSON.parse(read('cloudformation-template-update-stack.json'))
    const dir = mkdtempSync(path.join(tmpdir(), 'echomq-zip-'))
    // One zip per function (package.individually): the reaper's, and the worker function's beside it.
    const zip = path.join(dir, 'sweep.zip')
    copyFileSync(`${root}.serverless/sweep.zip`, zip)
    copyFileSync(`${root}.serverless/work.zip`, path.join(dir, 'work.zip'))
    copyFileSync(`${root}.serverless/cloudformation-template-update-stack.json`, path.join(dir, 'template.json'))
    return {
      output: `${stdout}\n${stderr}`,
      template: path.join(dir, 'template.json'),
      zip,
      texts: ['cloudformation-template-create-stack.json', 'cloudformation-template-update-stack.json', 'serverless-state.json']
        .map(read)
        .join('\n'),
      resources: template.Resources,
      conditions: template.Conditions ?? {},
      outputs: template.Outputs,
    }
  })
}

/** A packaging run that must fail (a bad parameter): its output. Fails while resolving variables, before any build. */
async function packageFails(args: string[]): Promise<{ code: number | undefined; output: string }> {
  const err = (await run(`${root}node_modules/.bin/serverless`, ['package', ...args], {
    cwd: root,
    env: offlineEnv,
    timeout: 120_000,
  }).catch((e: unknown) => e)) as { stdout?: string; stderr?: string; code?: number }
  return { code: err.code, output: `${err.stdout ?? ''}\n${err.stderr ?? ''}` }
}

/** A bad parameter, the resolver (serverless/<file>.cjs) that must refuse it, and the message it must give. */
export interface BadParameter {
  args: string[]
  resolver: string
  message: RegExp
}

/**
 * Each bad parameter's packaging run, in as few runs as the resolvers allow: osls resolves every variable
 * before it stops and lists each resolver's error on a line of its own, so parameters refused by different
 * resolvers share a run (a resolver stops at its first error: one case each per run). For each case: its
 * run's exit code, and the line of its resolver's error (its run's whole output when there is none).
 */
export async function packagingErrors(cases: BadParameter[]): Promise<{ code: number | undefined; line: string }[]> {
  const runs: number[][] = []
  cases.forEach((c, i) => {
    const fits = (members: number[]) => members.every((m) => cases[m]?.resolver !== c.resolver)
    const shared = runs.find(fits)
    if (shared) shared.push(i)
    else runs.push([i])
  })
  const results: { code: number | undefined; line: string }[] = []
  // Four at a time: each is a Node process resolving the whole file, on a machine other test files share.
  for (let r = 0; r < runs.length; r += 4) {
    await Promise.all(
      runs.slice(r, r + 4).map(async (members) => {
        const { code, output } = await packageFails(members.flatMap((m) => cases[m]?.args ?? []))
        for (const m of members) {
          const from = `Cannot resolve "${cases[m]?.resolver}": Returned JS function errored with: `
          results[m] = { code, line: output.split('\n').find((l) => l.includes(from)) ?? output }
        }
      }),
    )
  }
  return results
}

/** cfn-lint (AWS's CloudFormation linter, on this machine's image and installed by .ci/run) on a template. */
export async function cfnLint(template: string): Promise<{ code: number; output: string }> {
  return run('cfn-lint', ['--format', 'parseable', template]).then(
    ({ stdout, stderr }) => ({ code: 0, output: `${stdout}${stderr}` }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  )
}
