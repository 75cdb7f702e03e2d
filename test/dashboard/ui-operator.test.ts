/**
 * The dashboard's operator view over HTTP, on real Redis servers: the workers page (an idle worker seen
 * by its named connection, a busy one with its jobs in flight, a dead one still holding jobs listed as
 * gone), the overview's and queue page's "no worker" flag, Redis's health with the red banner while
 * maxmemory-policy is not noeviction, the degraded view when CLIENT LIST is refused, wait and processing
 * time per minute, absolute UTC times beside relative ones, and a three-master cluster.
 */
import { readFileSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../lib/index.js'
import { CLIENT_LIST_TTL_MS, readConnected, readPresence } from '../../lib/ui/operator.js'
import { QueueSet } from '../../lib/ui/read.js'
import { perMinute, quantile } from '../../lib/ui/timing.js'
import { useCluster } from '../helpers/cluster.js'
import { countingClient } from '../helpers/counting.js'
import { useDashboards } from '../helpers/dashboard.js'
import { useQueues } from '../helpers/fixture.js'
import { ManualClock } from '../helpers/manual-clock.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const { open, worker } = useQueues(redis)
const dashboard = useDashboards(redis)
const cleanup: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn()
  await redis.client.config('SET', 'maxmemory-policy', 'noeviction')
})

const idle = () => new Promise<never>(() => undefined)
const ISO = /<span class="abs">\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ<\/span>/

describe('the workers page', () => {
  it('lists an idle worker, a busy one with its jobs in flight, and a dead one still holding jobs as gone', async () => {
    const q = open('mail')
    await crashedJobs(redis.client, 'mail', 2) // two jobs held by 'dead-worker', whose leases lapsed
    const busy = worker('mail', idle, { name: 'busy-1', concurrency: 3, closeTimeout: 100, skipStalledCheck: true })
    await q.addBulk([1, 2, 3].map((i) => ({ name: 'send', data: { i } })))
    await waitFor(async () => (await q.counts()).active === 5, { what: 'five jobs in flight' })
    worker('mail', idle, { name: 'idle-1', skipStalledCheck: true })
    await waitFor(async () => (await q.getWorkersCount()) === 2, { what: 'two workers connected' })
    expect(busy.isRunning()).toBe(true)
    const d = await dashboard()
    const page = (await d.get('/workers')).text
    const row = (name: string) =>
      new RegExp(`<tr[^>]*><td>mail</td><th scope="row"><code>${name}</code></th>[\\s\\S]*?</tr>`).exec(page)?.[0]
    const idleRow = row('idle-1')
    const busyRow = row('busy-1')
    const deadRow = row('dead-worker')
    // host, one connection, jobs in flight, last seen (relative, and absolute in UTC)
    expect(idleRow).toMatch(/<td>127\.0\.0\.1<\/td><td class="num">1<\/td>\s*<td class="num">0<\/td>/)
    expect(idleRow).toMatch(/<time data-live-time="seen\|\d+"[^>]*><span class="rel">(now|\d+ s ago)<\/span>/)
    expect(idleRow).toMatch(ISO)
    expect(busyRow).toMatch(/<td class="num">3<\/td>/)
    // Busy, it does not wait for work: its live leases say it is alive.
    expect(busyRow).toContain(' · renewing 3 leases')
    expect(deadRow).toMatch(/<tr class="gone">/)
    expect(deadRow).toMatch(/2 <span class="badge warn">2 lapsed<\/span>/)
    expect(deadRow).toContain('<span class="badge warn">gone</span>')
    // Redis's health: the version, memory, and the policy.
    expect(page).toMatch(/<td>(redis|valkey) \d+\.\d+\.\d+<\/td>/)
    expect(page).toMatch(/<td class="num">[\d.]+ (KiB|MiB|GiB)<\/td>/)
    expect(page).toContain('<code>noeviction</code>')
    expect(page).not.toContain('data-banner="maxmemory-policy"')
    // The JSON refresh carries the last-seen times.
    const json = JSON.parse((await d.get('/workers', { accept: 'application/json' })).text)
    expect(Object.keys(json.times).filter((k) => k.startsWith('seen|'))).toHaveLength(2)
  })

  it('every page carries a red banner while maxmemory-policy is not noeviction', async () => {
    await open('mail').add('send', {})
    await redis.client.config('SET', 'maxmemory-policy', 'allkeys-lru')
    const d = await dashboard()
    for (const path of ['/', '/workers', '/queues/mail?state=wait', '/queues/mail/jobs/1', '/queues/mail/timing']) {
      const page = (await d.get(path)).text
      expect([path, page]).toEqual([
        path,
        expect.stringContaining('<div class="banner danger" role="alert" data-banner="maxmemory-policy">'),
      ])
      expect(page).toContain('maxmemory-policy is <code>allkeys-lru</code>')
    }
    expect((await d.get('/workers')).text).toContain('<code class="bad">allkeys-lru</code>')
    await redis.client.config('SET', 'maxmemory-policy', 'noeviction')
    expect((await d.get('/')).text).not.toContain('data-banner')
  })
})

describe('a queue with ready jobs and no worker', () => {
  it('is flagged on the overview and its page, and no longer once a worker connects', async () => {
    const q = open('orphan')
    await q.add('x', {})
    open('fine') // registered, empty: no flag without ready jobs
    const d = await dashboard()
    const overview = (await d.get('/')).text
    expect(overview).toContain('<th scope="col" class="num">Workers</th>')
    expect(overview).toMatch(/<span data-live="orphan\|workers" class="badge danger">none<\/span>/)
    expect(overview).toMatch(/<span data-live="fine\|workers">0<\/span>/)
    const page = (await d.get('/queues/orphan?state=wait')).text
    expect(page).toContain('data-flag="no-worker"')
    expect(page).toMatch(/<strong>No worker:<\/strong> 1\s+job is ready/)
    await q.pause() // the job stays ready for the check
    const w = worker('orphan', idle, { name: 'late' })
    await w.waitUntilReady()
    await waitFor(async () => (await q.getWorkersCount()) === 1)
    // What CLIENT LIST said is kept CLIENT_LIST_TTL_MS: the worker shows within that.
    const shown = async () => /<span data-live="orphan\|workers">1<\/span>/.test((await d.get('/')).text)
    await waitFor(shown, { timeoutMs: CLIENT_LIST_TTL_MS + 2_000, intervalMs: 100, what: 'the overview to count the worker' })
    expect((await d.get('/queues/orphan?state=wait')).text).not.toContain('data-flag="no-worker"')
  })

  it('a Redis user without +client|list: the workers are unknown, said so, and no queue is flagged', async () => {
    await redis.client.call(
      'ACL',
      ...['SETUSER', 'board', 'on', '>pw', '~*', '-@all', '+@read', '+@write', '+@scripting', '+@connection'],
      ...['+@transaction', '+time', '-@dangerous', '+info'],
    )
    await open('orphan').add('x', {})
    const d = await dashboard({ connection: `redis://board:pw@127.0.0.1:${redis.port}` })
    const overview = (await d.get('/')).text
    expect(overview).toMatch(/title="CLIENT LIST is refused by this Redis[^"]*"><span data-live="orphan\|workers">\?<\/span>/)
    expect((await d.get('/queues/orphan?state=wait')).text).not.toContain('data-flag="no-worker"')
    const page = (await d.get('/workers')).text
    expect(page).toContain('data-note="client-list"')
    expect(page).toMatch(/Idle workers cannot be seen: .*NOPERM.*\+client\|list/)
  })
})

describe("docs/dashboard-operators.md's dashboard user", () => {
  it('sees idle workers and Redis health, and leaves nothing in the ACL log', async () => {
    const doc = readFileSync(new URL('../../docs/dashboard-operators.md', import.meta.url), 'utf8')
    const line = /^ACL SETUSER dashboard (.+)$/m.exec(doc)?.[1] ?? ''
    expect(line).toContain('+client|list')
    await redis.client.call('ACL', 'SETUSER', 'dashboard', 'reset', ...line.replace('>PASSWORD', '>pw').split(' '))
    await redis.client.call('ACL', 'LOG', 'RESET')
    const q = open('seen')
    await q.add('x', {})
    await q.pause()
    const w = worker('seen', idle, { name: 'quiet' })
    await w.waitUntilReady()
    await waitFor(async () => (await q.getWorkersCount()) === 1)
    const d = await dashboard({ connection: `redis://dashboard:pw@127.0.0.1:${redis.port}` })
    expect((await d.get('/')).text).toMatch(/<span data-live="seen\|workers">1<\/span>/)
    const page = (await d.get('/workers')).text
    expect(page).toContain('<code>quiet</code>')
    expect(page).toContain('<code>noeviction</code>')
    expect(await d.get('/queues/seen/timing')).toMatchObject({ status: 200 })
    expect(await redis.client.call('ACL', 'LOG')).toEqual([])
  })
})

describe('wait and processing time per minute', () => {
  it('quantiles by nearest rank, minutes newest first', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2)
    expect(quantile([1, 2, 3, 4], 0.95)).toBe(4)
    expect(quantile([], 0.5)).toBe(0)
    const m = 60_000
    const rows = perMinute([
      { readyAt: 0, startedOn: 100, finishedOn: 5 * m },
      { readyAt: 2 * m, startedOn: 2 * m + 300, finishedOn: 2 * m + 1_300 },
    ])
    expect(rows.map((r) => [r.minute, r.jobs, r.waitP50])).toEqual([
      [5, 1, 100],
      [2, 1, 300],
    ])
    expect(rows[1]?.runP50).toBe(1_000)
  })

  it("reads the finished jobs kept: a minute's count, wait and processing time", async () => {
    const q = open('timed')
    await q.addBulk(Array.from({ length: 4 }, (_, i) => ({ name: 'x', data: { i } })))
    worker('timed', () => new Promise((resolve) => setTimeout(resolve, 120)), { concurrency: 1 })
    await waitFor(async () => (await q.counts()).completed === 4, { what: 'four completed' })
    const d = await dashboard()
    expect((await d.get('/queues/timed?state=completed')).text).toContain('href="/queues/timed/timing"')
    const page = (await d.get('/queues/timed/timing')).text
    const row = /<tbody><tr><th scope="row">([\s\S]*?)<\/tr>/.exec(page)?.[1] ?? ''
    expect(row).toMatch(ISO)
    const cells = [...row.matchAll(/<td class="num">([^<]+)<\/td>/g)].map((c) => c[1])
    const total = [...page.matchAll(/<tr><th scope="row">[\s\S]*?<td class="num">(\d+)<\/td>/g)].reduce((a, c) => a + Number(c[1]), 0)
    expect(total).toBe(4)
    // processing p50 is the 120 ms run (a run never takes less); the last job waited for three runs
    expect(Number(/^(\d+) ms$/.exec(cells[3] ?? '')?.[1])).toBeGreaterThanOrEqual(120)
    expect(cells[2]).toMatch(/^\d+ ms$/)
  })
})

describe('on a Redis Cluster', () => {
  const cluster = useCluster()

  it("lists the workers of queues on different primaries, and every primary's health", async () => {
    const client = cluster.connect()
    const names = ['ca', 'cb', 'cc', 'cd']
    for (const name of names) {
      // direct: a queue on a cluster, the connection under test
      const q = new Queue(name, { connection: client })
      cleanup.push(() => q.close())
      // direct: a worker on a cluster, the connection under test
      const w = new Worker(name, idle, { connection: cluster.url, name: `w-${name}` })
      cleanup.push(() => w.close())
    }
    const d = await dashboard({ connection: cluster.url })
    const rowsOf = async () => [...(await d.get('/workers')).text.matchAll(/<th scope="row"><code>(w-c\w)<\/code><\/th>/g)].map((m) => m[1])
    await waitFor(async () => (await rowsOf()).length === 4, { what: 'four workers listed' })
    expect((await rowsOf()).sort()).toEqual(names.map((n) => `w-${n}`))
    const page = (await d.get('/workers')).text
    expect([...page.matchAll(/<tr><th scope="row"><code>[^<]+:\d+<\/code><\/th><td>(redis|valkey) /g)]).toHaveLength(3)
    // A dashboard's first page, before its cluster client knew the nodes, counts every queue's worker.
    const fresh = await dashboard({ connection: cluster.url })
    const overview = (await fresh.get('/')).text
    for (const name of names) expect(overview).toContain(`<span data-live="${name}|workers">1</span>`)
  })
})

describe('what a page costs Redis, and the banner on every page', () => {
  it('CLIENT LIST is read once per CLIENT_LIST_TTL_MS (by the injected clock), however many pages ask', async () => {
    const counting = await countingClient(redis.port)
    const clock = new ManualClock()
    const set = new QueueSet(counting.client, 'emq', ['mail'], clock)
    try {
      const clientLists = () => counting.sent.filter((c) => c === 'client').length
      await readConnected(set, ['mail'])
      await Promise.all([readConnected(set, ['mail']), readPresence(set, ['mail'], 0)])
      expect(clientLists()).toBe(1)
      clock.jump(CLIENT_LIST_TTL_MS - 1)
      await readConnected(set, ['mail'])
      expect(clientLists()).toBe(1)
      clock.jump(1)
      await readConnected(set, ['mail'])
      expect(clientLists()).toBe(2)
    } finally {
      await set.close()
      counting.close()
    }
  })

  it('a 404 page carries the red banner too', async () => {
    await open('mail').add('send', {})
    await redis.client.config('SET', 'maxmemory-policy', 'allkeys-lru')
    const d = await dashboard()
    for (const path of ['/nowhere', '/queues/nosuch', '/queues/mail/jobs/404', '/queues/mail/jobs/1/extra']) {
      const page = await d.get(path)
      expect([path, page.status]).toEqual([path, 404])
      expect([path, page.text]).toEqual([path, expect.stringContaining('data-banner="maxmemory-policy"')])
    }
  })
})
