/**
 * The dashboard over HTTP (lib/ui/), on a real Redis: what each page shows, the actions and their
 * confirmations, the refusals (no token, read-only, bad input, no credentials, a foreign Host), inert
 * rendering of hostile job data, the headers, mounting under a base path in another server, and that a
 * page reads only the page it shows (counted on the client, independent of the size of the sets).
 */
import { readdirSync, statSync } from 'node:fs'
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { listJobs, renderJobList } from '../../cli/reports/job-lists.js'
import { sweep } from '../../lib/index.js'
import { LIST_ORDER } from '../../lib/read-model.js'
import { registeredQueues } from '../../lib/registry.js'
import { createDashboard, serveDashboard } from '../../lib/ui/index.js'
import { type TestDashboard, useDashboards } from '../helpers/dashboard.js'
import { useQueues } from '../helpers/fixture.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const { open, worker } = useQueues(redis)
const dashboard = useDashboards(redis)
const cleanup: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn()
})

/** Fails `n` jobs of `name` through a real worker (one attempt each, kept). */
async function failJobs(name: string, n: number, data: (i: number) => unknown = (i) => ({ i })): Promise<void> {
  const q = open(name)
  await q.addBulk(
    Array.from({ length: n }, (_, i) => ({ name: 'send', data: data(i), opts: { jobId: `f${i}`, attempts: 1, removeOnFail: false } })),
  )
  const w = worker(
    name,
    (job) => {
      throw new Error(`refused ${job.id}`)
    },
    { concurrency: 50, name: 'mailer-1' },
  )
  await waitFor(async () => (await q.counts()).failed === n, { what: `${n} failed jobs`, timeoutMs: 20_000 })
  await w.close()
}

type ErrorBody = { error: { code: string; message: string } }

const tokenOf = (html: string) => /name="token" value="([^"]+)"/.exec(html)?.[1] ?? ''

describe('pages', () => {
  it('the overview lists every registered queue with its counts and paused state, and nothing else', async () => {
    await failJobs('emails', 2)
    const sms = open('sms')
    await sms.add('text', {}, { delay: 60_000 })
    await sms.pause()
    const d = await dashboard()

    const page = await d.get('/')
    expect(page.status).toBe(200)
    expect(page.text).toContain('<a href="/queues/emails">emails</a>')
    expect(page.text).toMatch(/data-live="emails\|failed">2</)
    expect(page.text).toMatch(/data-live="sms\|delayed">1</)
    expect(page.text).toMatch(/data-live="sms\|paused" class="badge warn">paused</)
    expect(page.text).toMatch(/data-live="emails\|paused" class="badge">running</)

    const live = await d.get('/', { accept: 'application/json' })
    const snap = JSON.parse(live.text)
    expect(snap.text['emails|failed']).toBe('2')
    expect(snap.text['sms|paused']).toBe('paused')
    expect(snap.chart).toHaveLength(60)
    expect(snap.chart.at(-1).failed + snap.chart.at(-2).failed).toBe(2)
  })

  it('the waiting list: the dashboard and echomq jobs each say the order they show, in the same words', async () => {
    const q = open('emails')
    for (const id of ['w1', 'w2', 'w3']) await q.add('send', {}, { jobId: id })
    await q.add('send', {}, { jobId: 'front', lifo: true }) // added last, runs first
    const d = await dashboard()
    const page = (await d.get('/queues/emails?state=wait')).text
    expect([...page.matchAll(/<code>(w\d|front)<\/code>/g)].map((m) => m[1])).toEqual(['w3', 'w2', 'w1', 'front'])
    expect(page).toContain('<caption>Waiting jobs, last to run first</caption>')
    const cli = renderJobList(await listJobs(q, 'wait', 0, 10))
    expect([...cli.matchAll(/^(w\d|front) /gm)].map((m) => m[1])).toEqual(['front', 'w1', 'w2', 'w3'])
    expect(cli).toContain('(next to run first)')
    // The lists both show alike are said alike.
    for (const state of ['prioritized', 'delayed', 'completed', 'failed'] as const) {
      const caption = /<caption>[^<]*jobs, ([^<]+)<\/caption>/.exec((await d.get(`/queues/emails?state=${state}`)).text)?.[1]
      expect([state, caption]).toEqual([state, LIST_ORDER[state]])
    }
  })

  it("a queue's jobs by state, paged last to run first, and a search by id goes to the job", async () => {
    const q = open('emails')
    for (let i = 0; i < 7; i++) await q.add('send', { i }, { jobId: `w${i}` })
    const d = await dashboard({ pageSize: 3 })

    const first = await d.get('/queues/emails?state=wait')
    expect(first.status).toBe(200)
    const ids = (text: string) => [...text.matchAll(/<code>(w\d)<\/code>/g)].map((m) => m[1])
    expect(ids(first.text)).toEqual(['w6', 'w5', 'w4'])
    expect(first.text).toContain('1–3 of 7')
    expect(ids((await d.get('/queues/emails?state=wait&page=3')).text)).toEqual(['w0'])

    const found = await d.get('/queues/emails?id=w3')
    expect(found.status).toBe(303)
    expect(found.headers.get('location')).toBe('/queues/emails/jobs/w3')
    expect((await d.get('/queues/emails/jobs/nope')).status).toBe(404)
  })

  it("a job's page: data, options, errors, logs, worker and times", async () => {
    const q = open('emails')
    await q.add('send', { to: 'a@b.c' }, { jobId: 'j', attempts: 1, backoff: 1_000 })
    const _w = worker(
      'emails',
      async (job) => {
        await job.log('connecting')
        await job.updateProgress(40)
        throw new Error('smtp refused')
      },
      { name: 'mailer-7' },
    )
    await waitFor(async () => (await q.getJob('j'))?.state === 'failed', { what: 'the job to fail' })
    const d = await dashboard()

    const page = (await d.get('/queues/emails/jobs/j')).text
    expect(page).toContain('&quot;to&quot;: &quot;a@b.c&quot;')
    expect(page).toContain('<pre class="error">smtp refused</pre>')
    // The failed run's stack, as the job keeps it.
    expect(page).toContain('<h3>Failed run 1 (the last) of those kept</h3><pre class="error">Error: smtp refused\n    at ')
    expect(page).toContain('<pre>connecting</pre>')
    expect(page).toContain('<dd>mailer-7</dd>')
    expect(page).toContain('<progress max="100" value="40">')
    expect(page).toMatch(/&quot;backoff&quot;: \{\s+&quot;type&quot;: &quot;fixed&quot;/)
    expect(page).toMatch(
      /<time data-kind="ago" data-at="\d+" datetime="[\d-]+T[\d:.]+Z" title="[^"]+"><span class="rel">(now|\d+ (ms|s) ago)<\/span> <span class="abs">[\d-]+T[\d:]+Z<\/span><\/time>/,
    )
  })

  it('in-flight jobs grouped by worker with their leases; a dead worker leads, its jobs marked, then recovered', async () => {
    const q = open('emails')
    await crashedJobs(redis.client, 'emails', 2)
    await q.add('send', {}, { jobId: 'live' })
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    const w = worker('emails', () => gate, { name: 'healthy-1', lockDuration: 30_000, skipStalledCheck: true })
    cleanup.push(async () => {
      release()
      await w.close()
    })
    await waitFor(async () => (await q.counts()).active === 3, { what: 'three jobs in flight' })
    await sweep(redis.client, 'emails', { graceMs: 60_000 })
    const d = await dashboard({ graceMs: 60_000 })

    const page = (await d.get('/queues/emails?state=active')).text
    const dead = page.indexOf('Worker <code>dead-worker</code>')
    const healthy = page.indexOf('Worker <code>healthy-1</code>')
    expect(dead).toBeGreaterThan(-1)
    expect(healthy).toBeGreaterThan(dead)
    expect(page).toContain('<section class="worker dying">')
    expect(page).toMatch(/2 leases lapsed/)
    expect(page).toMatch(/<span class="badge warn">marked<\/span> <time data-live-time="mark\|/)
    expect(page).toMatch(
      /recovered by the first sweep after <time data-live-time="recover\|[^"]+" data-kind="ago" data-at="\d+"[^>]*><span class="rel">in (59|60) s/,
    )
    expect(page).toMatch(/data-live-time="lease\|live" data-kind="lease" data-at="\d+"[^>]*><span class="rel">(29|30) s left</)

    const job = (await d.get('/queues/emails/jobs/live')).text
    expect(job).toContain('<dt>Held by worker</dt><dd>healthy-1</dd>')
    expect(job).toMatch(/s left<\/span> <span class="abs">[\d-]+T[\d:]+Z<\/span><\/time>/)
  })

  it('the delayed page shows when each job is due, and says when the queue has no job schedulers', async () => {
    const q = open('emails')
    await q.add('later', {}, { jobId: 'd', delay: 120_000 })
    const d = await dashboard()
    const page = (await d.get('/queues/emails?state=delayed')).text
    expect(page).toMatch(/data-live-time="due\|d" data-kind="ago" data-at="\d+"[^>]*><span class="rel">in (1|2) min</)
    expect(page).toContain('No job schedulers.')
  })
})

describe('actions', () => {
  it('pause and resume from the overview, with a notice; the queue is paused for every worker', async () => {
    const q = open('emails')
    await q.add('send', {})
    const d = await dashboard()
    const token = await d.token()

    const paused = await d.post('/queues/emails', { token, action: 'pause', back: 'overview' })
    expect(paused.status).toBe(303)
    expect(paused.headers.get('location')).toBe('/?done=paused')
    expect(await q.isPaused()).toBe(true)
    expect((await d.get('/?done=paused')).text).toContain('Queue paused')
    await d.post('/queues/emails', { token, action: 'resume', back: 'overview' })
    expect(await q.isPaused()).toBe(false)
  })

  it('retry one failed job from its page; retry all asks first, then moves them all', async () => {
    await failJobs('emails', 3)
    const q = open('emails')
    const d = await dashboard()
    const token = tokenOf((await d.get('/queues/emails/jobs/f0')).text)

    const one = await d.post('/queues/emails/jobs/f0', { token, action: 'retry' })
    expect(one.headers.get('location')).toBe('/queues/emails/jobs/f0?done=retried&n=1')
    expect((await q.getJob('f0'))?.state).toBe('wait')

    const ask = await d.post('/queues/emails', { token, action: 'retry-all' })
    expect(ask.status).toBe(200)
    const confirm = await ask.text()
    expect(confirm).toContain('Retry all 2 failed jobs of queue emails?')
    expect(confirm).toContain('<input type="hidden" name="confirm" value="yes">')
    expect((await q.counts()).failed).toBe(2)

    const done = await d.post('/queues/emails', { token, action: 'retry-all', confirm: 'yes' })
    expect(done.headers.get('location')).toBe('/queues/emails?state=failed&done=retried&n=2')
    expect(await q.counts()).toMatchObject({ failed: 0, wait: 3 })
  })

  it('remove a job, promote a delayed job, clean completed (confirmed)', async () => {
    const q = open('emails')
    await q.add('later', {}, { jobId: 'd', delay: 3_600_000 })
    await q.add('gone', {}, { jobId: 'x', delay: 3_600_000 })
    for (let i = 0; i < 3; i++) await q.add('ok', {}, { jobId: `c${i}`, removeOnComplete: false })
    const d = await dashboard()
    const token = await d.token()

    expect(
      (await d.post('/queues/emails/jobs/d', { token, action: 'promote', back: 'queue', state: 'delayed' })).headers.get('location'),
    ).toBe('/queues/emails?state=delayed&done=promoted&n=1')
    expect((await q.getJob('d'))?.state).toBe('wait')
    expect((await d.post('/queues/emails/jobs/x', { token, action: 'remove' })).headers.get('location')).toBe(
      '/queues/emails?done=removed&n=1',
    )
    expect(await q.getJob('x')).toBeUndefined()

    const w = worker('emails', () => 'ok')
    await waitFor(async () => (await q.counts()).completed === 4, { what: 'four completions' })
    await w.close()
    expect(await (await d.post('/queues/emails', { token, action: 'clean-completed' })).text()).toContain('Remove all 4 completed jobs')
    expect((await q.counts()).completed).toBe(4)
    await d.post('/queues/emails', { token, action: 'clean-completed', confirm: 'yes' })
    expect((await q.counts()).completed).toBe(0)
  })

  it('a refused action says why and changes nothing: retry a job that is not failed, remove one in flight, promote one not delayed', async () => {
    const q = open('emails')
    await q.add('send', {}, { jobId: 'w' })
    const d = await dashboard()
    const token = await d.token()
    const before = await q.counts()
    const retry = await d.post('/queues/emails/jobs/w', { token, action: 'retry' }, { accept: 'application/json' })
    expect(retry.status).toBe(409)
    expect(((await retry.json()) as ErrorBody).error.code).toBe('ERR_JOB_STATE')
    expect((await d.post('/queues/emails/jobs/w', { token, action: 'promote' })).status).toBe(409)
    expect((await d.post('/queues/emails/jobs/nope', { token, action: 'remove' })).status).toBe(404)
    expect(await q.counts()).toEqual(before)
  })
})

describe('safety', () => {
  it('a POST without the page token is refused whatever its Origin; a wrong token too', async () => {
    const q = open('emails')
    await q.add('send', {})
    const d = await dashboard()
    const origin = d.url.replace(/\/$/, '')
    for (const [form, headers] of [
      [{ action: 'pause' }, { origin }],
      [{ action: 'pause' }, { origin: 'https://evil.example' }],
      [{ action: 'pause' }, {}],
      [
        { action: 'pause', token: 'guessed' },
        { origin, referer: d.url },
      ],
    ] as [Record<string, string>, Record<string, string>][]) {
      const res = await d.post('/queues/emails', form, { ...headers, accept: 'application/json' })
      expect(res.status).toBe(403)
      expect(((await res.json()) as ErrorBody).error.code).toBe('ERR_UI_TOKEN')
    }
    expect(await q.isPaused()).toBe(false)
  })

  it('read-only: no form on any page, every POST refused', async () => {
    await failJobs('emails', 2)
    const q = open('emails')
    await q.add('later', {}, { jobId: 'd', delay: 60_000 })
    const d = await dashboard({ readOnly: true })
    for (const path of ['/', '/queues/emails?state=failed', '/queues/emails?state=delayed', '/queues/emails/jobs/f0']) {
      const page = (await d.get(path)).text
      expect(page).not.toMatch(/<form method="post"/)
      expect(page).not.toMatch(/name="token"/)
    }
    const res = await d.post('/queues/emails/jobs/f0', { action: 'retry', token: 'x' })
    expect(res.status).toBe(403)
    expect((await q.getJob('f0'))?.state).toBe('failed')
  })

  it('bad input gets a 4xx with a code, and nothing changes', async () => {
    await failJobs('emails', 1)
    const q = open('emails')
    const d = await dashboard()
    const token = await d.token()
    const cases: [string, number, string][] = [
      ['/queues/emails?state=bogus', 400, 'ERR_UI_INPUT'],
      ['/queues/emails?page=0', 400, 'ERR_UI_INPUT'],
      ['/queues/emails?page=abc', 400, 'ERR_UI_INPUT'],
      ['/queues/emails?state=failed&state=wait', 400, 'ERR_UI_INPUT'],
      ['/queues/emails?sort=asc', 400, 'ERR_UI_INPUT'],
      ['/queues/emails?id=a%3Ab', 400, 'ERR_JOB_ID'],
      ['/queues/emails?done=hacked', 400, 'ERR_UI_INPUT'],
      ['/queues/bad%20name', 400, 'ERR_QUEUE_NAME'],
      ['/queues/%E0%A4%A', 400, 'ERR_UI_INPUT'],
      ['/queues/emails/jobs/a%3Ab%3Ac%3Ad', 400, 'ERR_JOB_ID'],
      ['/queues/never-made', 404, 'ERR_UI_NOT_FOUND'],
      ['/queues/emails/jobs/f0?logs=-1', 400, 'ERR_UI_INPUT'],
      ['/nowhere', 404, 'ERR_UI_NOT_FOUND'],
    ]
    for (const [path, status, code] of cases) {
      const res = await d.get(path, { accept: 'application/json' })
      expect([path, res.status, JSON.parse(res.text).error.code]).toEqual([path, status, code])
    }
    const posts: [Record<string, string>, number, string][] = [
      [{ token, action: 'explode' }, 400, 'ERR_UI_INPUT'],
      [{ token }, 400, 'ERR_UI_INPUT'],
      [{ token, action: 'retry', extra: '1' }, 400, 'ERR_UI_INPUT'],
      [{ token, action: 'retry', back: 'https://evil.example' }, 400, 'ERR_UI_INPUT'],
      [{ token, action: 'retry', confirm: 'no' }, 400, 'ERR_UI_INPUT'],
    ]
    for (const [form, status, code] of posts) {
      const res = await d.post('/queues/emails/jobs/f0', form, { accept: 'application/json' })
      expect([form, res.status, ((await res.json()) as ErrorBody).error.code]).toEqual([form, status, code])
    }
    const json = await fetch(`${d.url}queues/emails/jobs/f0`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ token, action: 'retry' }),
    })
    expect(json.status).toBe(415)
    const big = await d.post('/queues/emails/jobs/f0', { token, action: 'retry', back: 'x'.repeat(10_000) })
    expect(big.status).toBe(413)
    expect((await fetch(`${d.url}queues/emails`, { method: 'DELETE' })).status).toBe(405)
    expect((await q.getJob('f0'))?.state).toBe('failed')
    expect(await registeredQueues(redis.client, 'emq')).toEqual(['emails'])
  })

  it('a job whose data, name, error and log are markup shows them as text; the headers forbid inline script', async () => {
    const evil = '<script>document.title="owned"</script><img src=x onerror=alert(1)>'
    const q = open('emails')
    await q.add(evil, { html: evil }, { jobId: 'x', attempts: 1 })
    const _w = worker(
      'emails',
      async (job) => {
        await job.log(evil)
        throw new Error(evil)
      },
      { name: evil.slice(0, 100) },
    )
    await waitFor(async () => (await q.getJob('x'))?.state === 'failed', { what: 'the job to fail' })
    const d = await dashboard()
    for (const path of ['/queues/emails/jobs/x', '/queues/emails?state=failed']) {
      const page = await d.get(path)
      expect(page.text).not.toContain('<script>document')
      expect(page.text).not.toContain('<img src=x')
      expect(page.text).toContain('&lt;script&gt;document.title=')
      expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self';/)
      expect(page.headers.get('content-security-policy')).not.toMatch(/unsafe-inline|unsafe-eval/)
      expect(page.headers.get('x-content-type-options')).toBe('nosniff')
      expect(page.headers.get('x-frame-options')).toBe('DENY')
      // The page's own markup needs no inline script or style: every <script> has a src, no on* attribute.
      expect(page.text.match(/<script(?![^>]*\ssrc=)[^>]*>/g)).toBeNull()
      expect(page.text).not.toMatch(/<[^>]+\son\w+=/)
      expect(page.text).not.toMatch(/<[^>]+\sstyle=/)
    }
  })

  it("the Redis URL's password never reaches a page, an error or the live values", async () => {
    await redis.client.call('ACL', 'SETUSER', 'ui', 'on', '>s3cret-pass', '~*', '&*', '+@all')
    cleanup.push(() => redis.client.call('ACL', 'DELUSER', 'ui'))
    await failJobs('emails', 1)
    const d = await dashboard({ connection: redis.url.replace('redis://', 'redis://ui:s3cret-pass@') })
    const texts = [
      (await d.get('/')).text,
      (await d.get('/queues/emails?state=failed')).text,
      (await d.get('/queues/emails/jobs/f0')).text,
      (await d.get('/', { accept: 'application/json' })).text,
      (await d.get('/queues/emails?state=nope')).text,
    ]
    expect(texts[0]).toContain('redis://ui:***@127.0.0.1')
    for (const t of texts) expect(t).not.toContain('s3cret-pass')
    const wrong = await dashboard({ connection: redis.url.replace('redis://', 'redis://ui:wrong-pass@') })
    const failed = await wrong.get('/', { accept: 'application/json' })
    expect(failed.status).toBe(503)
    expect(failed.text).not.toContain('wrong-pass')
  })

  it('HTTP Basic: 401 with a challenge without credentials or with wrong ones; the page with the right ones', async () => {
    await open('emails').add('send', {})
    const d = await dashboard({ auth: 'admin:pa:ss' })
    const none = await d.get('/')
    expect(none.status).toBe(401)
    expect(none.headers.get('www-authenticate')).toBe('Basic realm="EchoMQ", charset="UTF-8"')
    expect(none.text).not.toContain('emails')
    const basic = (s: string) => ({ authorization: `Basic ${Buffer.from(s).toString('base64')}` })
    expect((await d.get('/', basic('admin:wrong'))).status).toBe(401)
    expect((await d.get('/', basic('admin:pa:s'))).status).toBe(401)
    expect((await d.get('/assets/app.js', basic('admin:pa:s'))).status).toBe(401)
    const ok = await d.get('/', basic('admin:pa:ss'))
    expect(ok.status).toBe(200)
    expect(ok.text).toContain('emails')
  })

  it('served on loopback without auth it answers only loopback Host names (DNS rebinding)', async () => {
    const d = await dashboard()
    const port = new URL(d.url).port
    expect(await statusWithHost(Number(port), `evil.example:${port}`)).toBe(403)
    expect((await d.get('/')).status).toBe(200)
    expect((await fetch(`http://localhost:${port}/`)).status).toBe(200)
  })

  it('serveDashboard refuses a host other than loopback without auth, and serves it with auth', async () => {
    await expect(serveDashboard({ connection: redis.url, host: '0.0.0.0', port: 0 })).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    const served = await serveDashboard({ connection: redis.url, host: '0.0.0.0', port: 0, auth: { username: 'a', password: 'b' } })
    cleanup.push(() => served.close())
    const port = new URL(served.url).port
    const res = await fetch(`http://127.0.0.1:${port}/`, { headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } })
    expect(res.status).toBe(200)
  })
})

/** The status of a GET with a Host header of our choosing (fetch() does not let one set it). */
function statusWithHost(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host } }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on('error', reject)
    req.end()
  })
}

describe('mounting', () => {
  async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
    const server = createServer(handler)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    cleanup.push(() => new Promise((resolve) => server.close(resolve)))
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  }

  it('under a base path in a plain node:http server; other paths left to the app', async () => {
    await open('emails').add('send', {})
    const dash = createDashboard({ connection: redis.client, basePath: '/admin/queues', refreshMs: 0 })
    cleanup.push(() => dash.close())
    const base = await listen((req, res) => {
      if (req.url?.startsWith('/admin/queues')) return dash(req, res)
      res.end('the app')
    })
    const page = await (await fetch(`${base}/admin/queues/`)).text()
    expect(page).toContain('<link rel="stylesheet" href="/admin/queues/assets/app.css">')
    expect(page).toContain('<a href="/admin/queues/queues/emails">emails</a>')
    expect((await fetch(`${base}/admin/queues`, { redirect: 'manual' })).headers.get('location')).toBe('/admin/queues/')
    expect((await fetch(`${base}/admin/queues/assets/app.css`)).headers.get('content-type')).toBe('text/css; charset=utf-8')
    expect(await (await fetch(`${base}/other`)).text()).toBe('the app')
  })

  it("as Express mounts middleware (app.use('/admin', handler): url stripped, originalUrl kept, next for the rest)", async () => {
    await open('emails').add('send', {})
    const dash = createDashboard({ connection: redis.client, basePath: '/admin', refreshMs: 0 })
    cleanup.push(() => dash.close())
    const base = await listen((req, res) => {
      // What Express does for app.use('/admin', dash): strip the mount path from req.url, keep originalUrl.
      const original = req.url ?? '/'
      if (original.startsWith('/admin')) {
        Object.assign(req, { originalUrl: original, baseUrl: '/admin', url: original.slice('/admin'.length) || '/' })
      }
      dash(req, res, () => res.end('next'))
    })
    expect(await (await fetch(`${base}/admin/queues/emails?state=wait`)).text()).toContain('Queue <code>emails</code>')
    expect(await (await fetch(`${base}/elsewhere`)).text()).toBe('next')
  })

  it('a body the framework parsed already (req.body) is used as it is', async () => {
    const q = open('emails')
    await q.add('send', {})
    const dash = createDashboard({ connection: redis.client, refreshMs: 0 })
    cleanup.push(() => dash.close())
    let token = ''
    const base = await listen((req, res) => {
      if (req.method === 'POST') Object.assign(req, { body: { token, action: 'pause' } })
      dash(req, res)
    })
    token = tokenOf(await (await fetch(`${base}/`)).text())
    expect((await fetch(`${base}/queues/emails`, { method: 'POST', redirect: 'manual' })).status).toBe(303)
    expect(await q.isPaused()).toBe(true)
  })
})

describe('cost', () => {
  it('the assets stay within the budget docs/dashboard.md states: 24 KiB in all, uncompressed, and nothing else is served', () => {
    const dir = new URL('../../lib/ui/assets/', import.meta.url)
    const files = readdirSync(dir).sort()
    expect(files).toEqual(['app.css', 'app.js'])
    const total = files.reduce((n, f) => n + statSync(new URL(f, dir)).size, 0)
    expect(total).toBeLessThanOrEqual(24 * 1024)
  })

  /** A client recording each command with its arguments. */
  function recording(): { client: Redis; sent: string[][] } {
    const client = new Redis(redis.port, '127.0.0.1', { maxRetriesPerRequest: 1 })
    const sent: string[][] = []
    const send = client.sendCommand.bind(client)
    client.sendCommand = ((command: { name: string; args: unknown[] }) => {
      sent.push([command.name, ...command.args.map(String)])
      return send(command as never)
    }) as typeof client.sendCommand
    cleanup.push(async () => client.disconnect())
    return { client, sent }
  }

  /**
   * The commands a GET sends, by name; fails on any command over a whole set, a SCAN, or a range longer
   * than a page (of jobs, or of a job's log lines: 100).
   */
  async function commandsOf(d: TestDashboard, sent: string[][], path: string, pageSize: number): Promise<string[]> {
    sent.length = 0
    expect((await d.get(path)).status).toBe(200)
    for (const [name, key, from, to] of sent) {
      expect(name).not.toMatch(/^(scan|keys|smembers|hkeys|hvals|sort|zunionstore)$/)
      if (/^(lrange|zrange|zrevrange)$/.test(name ?? '')) {
        const most = key?.endsWith(':logs') ? 100 : pageSize
        expect([key, Number(to) - Number(from) + 1 <= most, Number(from) >= 0 || Number(to) < 0]).toEqual([key, true, true])
      }
      if (name === 'hgetall') expect(key).toMatch(/:(metrics|[^:]+)$/)
    }
    return sent.map(([name]) => name ?? '').sort()
  }

  it('a page reads only the page it shows: the same commands with 200 or 2,000 jobs per state', async () => {
    const { client, sent } = recording()
    const d = await dashboard({ connection: client, pageSize: 50 })
    const paths = [
      '/queues/emails?state=failed',
      '/queues/emails?state=failed&page=3',
      '/queues/emails?state=wait',
      '/queues/emails/jobs/f1',
    ]
    await failJobs('emails', 200)
    const q = open('emails')
    await q.addBulk(Array.from({ length: 200 }, (_, i) => ({ name: 'w', data: { i } })))
    await d.get(paths[0] as string) // opens the Queue (a registry check, and its registration): once
    const small: string[][] = []
    for (const p of paths) small.push(await commandsOf(d, sent, p, 50))
    await q.obliterate({ force: true })
    await failJobs('emails', 2_000)
    await q.addBulk(Array.from({ length: 2_000 }, (_, i) => ({ name: 'w', data: { i } })))
    // CLIENT LIST is kept CLIENT_LIST_TTL_MS (3 s), so whether a page reads it again depends on the time
    // the 2,000 adds took: compared without it, and never more than once a page.
    const besidesClientList = (names: string[] | undefined) => (names ?? []).filter((n) => n !== 'client')
    for (const [i, p] of paths.entries()) {
      const large = await commandsOf(d, sent, p, 50)
      expect(large.filter((n) => n === 'client').length).toBeLessThanOrEqual(1)
      expect([p, besidesClientList(large)]).toEqual([p, besidesClientList(small[i])])
    }
    // A page of 50 jobs: their hashes, a few counts, the chart and the clock.
    expect(small[0]?.filter((n) => n === 'hgetall')).toHaveLength(51)
    expect(small[0]?.length).toBeLessThan(75)
  })

  it('the overview sends a bounded number of commands per queue, all sent together', async () => {
    const { client, sent } = recording()
    for (let i = 0; i < 30; i++) await open(`q${i}`).add('x', {})
    const d = await dashboard({ connection: client })
    await d.get('/')
    sent.length = 0
    await d.get('/')
    // Per queue: its counts (one MULTI of 9 reads), paused or not, the chart's hash and Redis's clock; for the
    // page: the registry, the clock and INFO server and memory. CLIENT LIST (the workers of every queue at
    // once), read for the first page, is kept CLIENT_LIST_TTL_MS: this one reads it once at most.
    const perQueue = (sent.filter(([n]) => n !== 'client').length - 4) / 30
    expect(sent.filter(([n]) => n === 'client').length).toBeLessThanOrEqual(1)
    expect(sent.filter(([n]) => n === 'info')).toHaveLength(2)
    expect(perQueue).toBeLessThanOrEqual(14)
    expect(sent.filter(([n]) => n === 'smembers')).toHaveLength(1)
  })
})
