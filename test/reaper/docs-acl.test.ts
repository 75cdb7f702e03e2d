/**
 * The least-privilege users of docs/connections.md, exactly as written there for each provider
 * (ElastiCache and MemoryDB access strings, Upstash's ACL lines, Redis Cloud's rules), given to a local
 * Redis 7 with a password (which each provider sets its own way): producers and a worker complete a job,
 * the reaper recovers a crashed worker's job, `echomq stats` answers, and Redis's ACL LOG holds nothing
 * but the reaper's eviction check (CONFIG GET, which these providers do not allow).
 * Each provider's own rules hold too: no password, `reset` or CONFIG in an ElastiCache or MemoryDB access
 * string, no subcommand rule for Upstash.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { Queue, Worker } from '../../lib/index.js'
import { captureLogs } from '../helpers/log-lines.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'

const run = promisify(execFile)
const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname
const PASSWORD = 'docs-acl-pw'
const doc = readFileSync(new URL('../../docs/connections.md', import.meta.url), 'utf8')

/** One provider's section of the page: from its heading to the next. */
const section = (heading: string) => doc.split(/^## /m).find((s) => s.startsWith(heading)) ?? ''

/** The rules of each user, by provider, as the page writes them (password and user state aside). */
function documentedRules(): Record<string, Record<'reaper' | 'app', string>> {
  const awsCli = (text: string) =>
    Object.fromEntries([...text.matchAll(/--user-name (\w+)[\s\S]*?--access-string '([^']+)'/g)].map((m) => [m[1], m[2] ?? ''])) as Record<
      'reaper' | 'app',
      string
    >
  const upstash = Object.fromEntries(
    [...section('Upstash').matchAll(/^ACL SETUSER (\w+) (.+)$/gm)].map((m) => [m[1], m[2] ?? '']),
  ) as Record<'reaper' | 'app', string>
  const cloud = Object.fromEntries(
    [...section('Redis Cloud').matchAll(/^(reaper|app):\s+(.+)$/gm)].map((m) => [m[1], `on ${m[2]}`]),
  ) as Record<'reaper' | 'app', string>
  return {
    elasticache: awsCli(section('Amazon ElastiCache (node-based')),
    memorydb: awsCli(section('Amazon MemoryDB')),
    upstash,
    'redis cloud': cloud,
  }
}

const redis = useRedis()
beforeEach(() => void captureLogs())
afterEach(() => vi.restoreAllMocks())

describe('the users of docs/connections.md', () => {
  const providers = documentedRules()

  it('every provider section names both users, within that provider’s rules', () => {
    for (const [provider, users] of Object.entries(providers)) {
      expect(Object.keys(users).sort(), provider).toEqual(['app', 'reaper'])
      for (const rules of Object.values(users)) expect(rules.replace(' >TOKEN', ''), provider).toMatch(/^on ~emq:\* -@all /)
    }
    for (const provider of ['elasticache', 'memorydb']) {
      for (const rules of Object.values(providers[provider] ?? {})) expect(rules).not.toMatch(/>|\breset|config/i)
    }
    for (const rules of Object.values(providers.upstash ?? {})) expect(rules.replace('>TOKEN', '')).not.toMatch(/\||>|nopass/)
  })

  it.each(Object.keys(providers))(
    '%s: producer, worker, reaper and CLI run end to end; nothing but CONFIG GET refused',
    async (provider) => {
      const users = providers[provider] as Record<'reaper' | 'app', string>
      for (const [user, rules] of Object.entries(users)) {
        const args = rules.replace('>TOKEN', '').split(/\s+/).filter(Boolean)
        await redis.client.call('ACL', 'SETUSER', user, 'reset', `>${PASSWORD}`, ...args)
      }
      await redis.client.call('ACL', 'LOG', 'RESET')
      const url = (user: string) => `redis://${user}:${PASSWORD}@127.0.0.1:${redis.port}`

      // direct: the producer connects as the documented ACL user app
      const queue = new Queue('emails', { connection: url('app') })
      // direct: the worker connects as the documented ACL user app
      const worker = new Worker('emails', async () => 'sent', { connection: url('app') })
      const completed = new Promise((resolve) => worker.on('completed', resolve))
      await queue.add('welcome', {}, { jobId: 'w1' })
      await completed
      await Promise.all([worker.close(), queue.close()])
      await crashedJobs(redis.client, 'sms', 1)
      const handler = createHandler({ REDIS_URL: url('reaper'), SWEEP_GRACE_MS: '0', METRICS_MODE: 'off', IS_LOCAL: 'true' })
      const runs = [await handler({}, {}), await handler({}, {})]
      const stats = await run(process.execPath, [BIN, 'stats', '--json', '--redis-url', url('app')])

      expect(runs[1]?.queues.sms).toEqual({ marked: 0, recovered: 1, failed: 0 })
      expect(JSON.parse(stats.stdout).emails).toMatchObject({ completed: 1 })
      // The reaper's one CONFIG GET per cold start, which these providers refuse (it logs a note instead).
      const refused = ((await redis.client.call('ACL', 'LOG')) as string[][]).map((entry) => {
        const field = (name: string) => entry[entry.indexOf(name) + 1]
        return `${field('username')} ${field('object')}`
      })
      expect(refused.filter((r) => r !== 'reaper config|get')).toEqual([])
    },
    30_000,
  )
})
