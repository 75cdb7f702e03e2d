/**
 * The two projects bench/first-job.ts times, as a new user gets them: EchoMQ from this repository's packed
 * tarball (`npm pack`, whose prepack builds dist/), BullMQ at the version in this repository's node_modules
 * (6.7.x) with ioredis, its optional peer, at the version EchoMQ uses; each installed with --omit=dev into a
 * fresh project of its own in a temp dir, with the same app.js but for the package it imports.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const exec = promisify(execFile)
const root = fileURLToPath(new URL('..', import.meta.url))
const INSTALL_MS = 300_000
const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }

export type Lib = 'echomq' | 'bullmq'

export interface Projects {
  dirs: Record<Lib, string>
  /** name@version of each project's queue package and its ioredis. */
  versions: Record<Lib, string>
  remove(): void
}

/**
 * The app: a Queue adds one job, a Worker processes it, the process exits on its `completed` event. The line
 * it prints when the job is done ends the timed span; `performance.now()` at its first statement (after
 * node's start and every static import) is when the package was loaded, from the process's start.
 */
export const appSource = (lib: Lib) => `import { Queue, Worker } from '${lib}'
const imported = performance.now()
const connection = { host: '127.0.0.1', port: Number(process.env.REDIS_PORT), maxRetriesPerRequest: null }
const queue = new Queue('first', { connection })
const worker = new Worker('first', async (job) => job.data.n * 2, { connection })
worker.on('completed', (job, result) => {
  console.log(\`processed \${job.id} \${result} imported \${imported.toFixed(1)}\`)
  process.exit(0)
})
await queue.add('double', { n: 21 })
`

const installedVersion = (dir: string, pkg: string) =>
  `${pkg}@${(JSON.parse(readFileSync(path.join(dir, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version}`

function npm(args: string[], cwd: string) {
  return exec('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline'], {
    cwd,
    env: npmEnv,
    timeout: INSTALL_MS,
    maxBuffer: 32 * 1024 * 1024,
  })
}

async function project(work: string, lib: Lib, install: string[]): Promise<string> {
  const dir = path.join(work, lib)
  mkdirSync(dir)
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `first-job-${lib}`, private: true, type: 'module' }))
  writeFileSync(path.join(dir, 'app.js'), appSource(lib))
  await npm(['install', ...install, '--omit=dev'], dir)
  return dir
}

/** Packs EchoMQ and installs both projects; `remove()` deletes them. */
export async function makeProjects(log: (message: string) => void): Promise<Projects> {
  const work = mkdtempSync(path.join(tmpdir(), 'echomq-first-job-'))
  try {
    log('first job: npm pack (builds dist/)')
    const { stdout } = await npm(['pack', '--json', '--pack-destination', work], root)
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as { filename: string }[]
    if (!packed) throw new Error(`npm pack printed no tarball: ${stdout}`)
    const bull = installedVersion(root, 'bullmq')
    const ioredis = installedVersion(root, 'ioredis')
    if (!bull.startsWith('bullmq@6.7.')) throw new Error(`first job: expected BullMQ 6.7.x in node_modules, found ${bull}`)
    log(`first job: installing the tarball, and ${bull} with ${ioredis}`)
    const dirs = {
      echomq: await project(work, 'echomq', [path.join(work, packed.filename)]),
      bullmq: await project(work, 'bullmq', [bull, ioredis]),
    }
    const versions = {
      echomq: `${installedVersion(dirs.echomq, 'echomq')} with ${installedVersion(dirs.echomq, 'ioredis')}`,
      bullmq: `${installedVersion(dirs.bullmq, 'bullmq')} with ${installedVersion(dirs.bullmq, 'ioredis')}`,
    }
    return { dirs, versions, remove: () => rmSync(work, { recursive: true, force: true }) }
  } catch (err) {
    rmSync(work, { recursive: true, force: true })
    throw err
  }
}
