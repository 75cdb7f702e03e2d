/**
 * The dashboard mounted under a base path in real servers, as docs/dashboard.md's recipes mount it: node:http
 * (the app as `next`), Express 5 (app.use, with and without a body parser), Fastify 5 (@fastify/middie's use) and Hono 4 on Node
 * (@hono/node-server, answering from the Node response). Each app listens on a free port and is driven
 * over HTTP with fetch, on a real Redis: the overview, that every link and asset is under the base path,
 * an asset and a job page, a retry with the page's token (the job is back in wait), a POST without it
 * (403, nothing changes), and a route of the app outside the base path (answered by the app).
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import middie from '@fastify/middie'
import { type HttpBindings, serve } from '@hono/node-server'
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { afterEach, describe, expect, it } from 'vitest'
import type { Queue } from '../../lib/index.js'
import { createDashboard, type DashboardHandler } from '../../lib/ui/index.js'
import { useQueues } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const { open, worker } = useQueues(redis)
const cleanup: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn()
})

/** Where the recipes mount the dashboard. */
const BASE = '/admin/queues'

/** Listens on a free loopback port, closed after the test; resolves to the app's origin. */
async function listen(server: Server): Promise<string> {
  if (!server.listening) await once(server, 'listening')
  cleanup.push(
    () =>
      new Promise((resolve) => {
        server.close(resolve)
        server.closeAllConnections()
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** Each server, as docs/dashboard.md mounts the dashboard in it, with one route of its own (/admin/stats). */
const frameworks: { name: string; start(dashboard: DashboardHandler): Promise<string> }[] = [
  {
    name: 'node:http (the app as next)',
    async start(dashboard) {
      const app = (_req: IncomingMessage, res: ServerResponse) => res.end('the app')
      return listen(createServer((req, res) => dashboard(req, res, () => app(req, res))).listen(0, '127.0.0.1'))
    },
  },
  {
    name: 'Express 5 (app.use)',
    async start(dashboard) {
      const app = express()
      app.use('/admin/queues', dashboard)
      app.get('/admin/stats', (_req, res) => {
        res.send('the app')
      })
      return listen(app.listen(0, '127.0.0.1'))
    },
  },
  {
    name: 'Express 5, after express.urlencoded()',
    async start(dashboard) {
      const app = express()
      app.use(express.urlencoded({ extended: false }))
      app.use('/admin/queues', dashboard)
      app.get('/admin/stats', (_req, res) => {
        res.send('the app')
      })
      return listen(app.listen(0, '127.0.0.1'))
    },
  },
  {
    name: 'Fastify 5 (@fastify/middie)',
    async start(dashboard) {
      const app = Fastify()
      await app.register(middie)
      app.use('/admin/queues', dashboard)
      app.get('/admin/stats', async () => 'the app')
      cleanup.push(() => app.close())
      await app.listen({ port: 0, host: '127.0.0.1' })
      return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
    },
  },
  {
    name: 'Hono 4 (@hono/node-server)',
    async start(dashboard) {
      const app = new Hono<{ Bindings: HttpBindings }>()
      app.all('/admin/queues/*', (c) => {
        dashboard(c.env.incoming, c.env.outgoing)
        return RESPONSE_ALREADY_SENT
      })
      app.get('/admin/stats', (c) => c.text('the app'))
      return listen(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server)
    },
  },
]

/** Fails `n` jobs (f0, f1...) of queue `name` through a real worker, one attempt each, kept. */
async function failJobs(q: Queue, n: number): Promise<void> {
  await q.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'send', data: { i }, opts: { jobId: `f${i}`, attempts: 1 } })))
  const w = worker(
    q.name,
    (job) => {
      throw new Error(`refused ${job.id}`)
    },
    { concurrency: n },
  )
  await waitFor(async () => (await q.counts()).failed === n, { what: `${n} failed jobs` })
  await w.close()
}

async function setup(start: (dashboard: DashboardHandler) => Promise<string>): Promise<{ origin: string; q: Queue }> {
  const q = open('emails')
  cleanup.push(() => q.close())
  await failJobs(q, 2)
  const dashboard = createDashboard({ connection: redis.client, basePath: BASE, refreshMs: 0 })
  cleanup.push(() => dashboard.close())
  return { origin: await start(dashboard), q }
}

const get = (url: string) => fetch(url, { redirect: 'manual' })
const post = (url: string, form: Record<string, string>) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
    redirect: 'manual',
  })
/** Every address a page links, loads or posts to, but for in-page ones (`#main`, the reload link's ""). */
const addresses = (html: string) => [...html.matchAll(/\b(?:href|src|action)="([^"#][^"]*)"/g)].map((m) => m[1])
const tokenOf = (html: string) => /name="token" value="([^"]+)"/.exec(html)?.[1] ?? ''

describe.each(frameworks)('mounted in $name', ({ start }) => {
  it('the overview, a job page and an asset under the base path; every link carries it; the app keeps its own routes', async () => {
    const { origin } = await setup(start)

    const overview = await get(`${origin}${BASE}/`)
    expect(overview.status).toBe(200)
    const page = await overview.text()
    expect(page).toContain(`<a href="${BASE}/queues/emails">emails</a>`)
    expect(page).toContain(`<link rel="stylesheet" href="${BASE}/assets/app.css">`)
    expect(page).toContain(`<script src="${BASE}/assets/app.js" defer></script>`)
    expect(addresses(page).length).toBeGreaterThan(5)
    for (const href of addresses(page)) expect(href).toMatch(/^\/admin\/queues\//)

    const asset = await get(`${origin}${BASE}/assets/app.js`)
    expect(asset.status).toBe(200)
    expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
    expect((await asset.text()).length).toBeGreaterThan(100)

    const job = await get(`${origin}${BASE}/queues/emails/jobs/f0`)
    expect(job.status).toBe(200)
    const jobPage = await job.text()
    expect(jobPage).toContain('refused f0')
    expect(jobPage).toContain(`action="${BASE}/queues/emails/jobs/f0"`)
    for (const href of addresses(jobPage)) expect(href).toMatch(/^\/admin\/queues\//)

    expect((await get(`${origin}${BASE}`)).headers.get('location')).toBe(`${BASE}/`)
    expect((await get(`${origin}${BASE}/queues/nope/jobs/1`)).status).toBe(404)

    const app = await get(`${origin}/admin/stats`)
    expect(app.status).toBe(200)
    expect(await app.text()).toBe('the app')
  })

  it("a retry posted with the page's token moves the job back to wait; a POST without the token is refused (403)", async () => {
    const { origin, q } = await setup(start)
    const token = tokenOf(await (await get(`${origin}${BASE}/queues/emails/jobs/f0`)).text())
    expect(token).not.toBe('')

    const refused = await post(`${origin}${BASE}/queues/emails/jobs/f1`, { action: 'retry' })
    expect(refused.status).toBe(403)
    expect(await refused.text()).toContain('ERR_UI_TOKEN')
    expect((await post(`${origin}${BASE}/queues/emails/jobs/f1`, { token: 'not-the-token', action: 'retry' })).status).toBe(403)
    expect((await q.getJob('f1'))?.state).toBe('failed')

    const retried = await post(`${origin}${BASE}/queues/emails/jobs/f0`, { token, action: 'retry' })
    expect(retried.status).toBe(303)
    const location = retried.headers.get('location') ?? ''
    expect(location).toBe(`${BASE}/queues/emails/jobs/f0?done=retried&n=1`)
    expect((await q.getJob('f0'))?.state).toBe('wait')
    expect(await q.counts()).toMatchObject({ failed: 1, wait: 1 })
    expect(await (await get(`${origin}${location}`)).text()).toContain('Retried 1 job: back in wait.')
  })
})
