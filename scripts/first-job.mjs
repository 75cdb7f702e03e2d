// Time to the first job, as a new user meets it: `node app.js` in a fresh project that adds one job and processes it,
// EchoMQ from this repository's packed tarball against BullMQ 6.7.0 from the npm registry (with ioredis, its optional
// peer), each installed with --omit=dev into its own sibling project. Runs alternate (so a busy machine slows both
// alike) against a private redis-server; prints the medians of the whole process's wall time and of the in-process
// time from the first import to the job's result.
//   node scripts/first-job.mjs [runs=15]
import { execFileSync, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const runs = Number(process.argv[2] ?? 15)
const root = fileURLToPath(new URL('..', import.meta.url))
const work = mkdtempSync(path.join(tmpdir(), 'echomq-first-job-'))
const npm = (args, cwd) =>
  execFileSync('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline'], { cwd, stdio: ['ignore', 'pipe', 'inherit'] })

const port = await new Promise((resolve) => {
  const server = createServer().listen(0, '127.0.0.1', () => {
    const { port } = server.address()
    server.close(() => resolve(port))
  })
})
const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
  stdio: 'ignore',
})

const app = (pkg, connection) => `const t0 = performance.now()
const { Queue, Worker } = await import('${pkg}')
const connection = ${connection}
const queue = new Queue('first-${pkg}', { connection })
const finished = new Promise((resolve) => {
  const worker = new Worker('first-${pkg}', async (job) => job.data.n * 2, { connection })
  worker.on('completed', (_job, result) => resolve({ worker, result }))
})
await queue.add('double', { n: 21 })
const { worker, result } = await finished
const ms = performance.now() - t0
await worker.close()
await queue.close()
if (result !== 42) throw new Error('wrong result ' + result)
console.log(ms.toFixed(1))
`

try {
  const tarball = path.join(
    work,
    JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: root }))[0].filename,
  )
  const projects = {
    echomq: { install: [tarball], code: app('echomq', `'redis://127.0.0.1:${port}'`) },
    bullmq: { install: ['bullmq@6.7.0', 'ioredis@6.0.0'], code: app('bullmq', `{ host: '127.0.0.1', port: ${port} }`) },
  }
  for (const [name, p] of Object.entries(projects)) {
    p.dir = path.join(work, name)
    mkdirSync(p.dir)
    writeFileSync(path.join(p.dir, 'package.json'), JSON.stringify({ name: `first-job-${name}`, private: true, type: 'module' }))
    writeFileSync(path.join(p.dir, 'app.js'), p.code)
    npm(['install', ...p.install, '--omit=dev'], p.dir)
    p.wall = []
    p.inside = []
  }
  for (let i = 0; i < runs; i++) {
    for (const p of Object.values(projects)) {
      const start = performance.now()
      const out = execFileSync(process.execPath, ['app.js'], { cwd: p.dir, encoding: 'utf8', timeout: 30_000 })
      p.wall.push(performance.now() - start)
      p.inside.push(Number(out.trim()))
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)].toFixed(0)
  for (const [name, p] of Object.entries(projects))
    console.log(
      `${name.padEnd(7)} node app.js: median ${median(p.wall)} ms wall, ${median(p.inside)} ms from import to the first job's result (${runs} runs)`,
    )
} finally {
  redis.kill()
  rmSync(work, { recursive: true, force: true })
}
