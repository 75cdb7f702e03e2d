import { spawn, execFileSync } from 'node:child_process'
import { Redis } from 'ioredis'
import { finishRuns } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
const port = 47123
const child = spawn('valgrind', ['--tool=callgrind', '--callgrind-out-file=/work/wt/cg/empty.out', 'redis-server', '--port', String(port), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
const r = new Redis({ host: '127.0.0.1', port, retryStrategy: () => 200 })
for (;;) { try { await r.ping(); break } catch { await new Promise((s) => setTimeout(s, 300)) } }
const keys = queueKeys('emq', 'q')
await finishRuns(r as never, keys, [])
execFileSync('callgrind_control', ['-z', String(child.pid)])
const N = 500
for (let i = 0; i < N; i++) await finishRuns(r as never, keys, [])
execFileSync('callgrind_control', ['-d', String(child.pid)])
child.kill('SIGKILL'); await r.quit().catch(() => {}); process.exit(0)
