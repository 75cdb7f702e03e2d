/**
 * The dashboard in a real browser (headless Chromium): the overview shows a queue's counts and keeps them
 * current; a failed job is retried from its page and its state changes; a `<script>` in job data does not
 * run; a POST without the page's token is refused, from the page's own origin and from another site's
 * form; `echomq ui --read-only` shows no action; keyboard and dark mode. Also makes docs/dashboard.md's two
 * screenshots (written to docs/ when UPDATE_SCREENSHOTS=1).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { copyFileSync, mkdtempSync, statSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type Queue, sweep } from '../../lib/index.js'
import { launchBrowser, type TestBrowser } from '../helpers/browser.js'
import { type TestDashboard, useDashboards } from '../helpers/dashboard.js'
import { useQueues } from '../helpers/fixture.js'
import { crashedJobs } from '../helpers/queue-state.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname
const DOCS = new URL('../../docs/', import.meta.url).pathname
const SHOTS = mkdtempSync(path.join(tmpdir(), 'echomq-shots-'))
const EVIL = "<script>window.__pwned = true; alert('pwned')</script>"

const redis = useRedis()
const { open, worker } = useQueues(redis)
const serve = useDashboards(redis)
let browser: TestBrowser
const cleanup: (() => Promise<unknown>)[] = []

beforeAll(async () => {
  browser = await launchBrowser()
}, 60_000)
afterAll(async () => {
  await browser?.close()
})
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn()
})

async function newPage(): Promise<Page> {
  const page = await browser.context.newPage()
  const dialogs: string[] = []
  page.on('dialog', (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
  cleanup.push(async () => {
    await page.close()
    expect(dialogs).toEqual([])
  })
  return page
}

/** A queue as a new user would find it: failed (one with a script in its data), completed, delayed, in flight, stalled. */
async function seed(): Promise<Queue> {
  const q = open('emails')
  await q.add('send', { to: 'ann@example.com' }, { jobId: 'welcome-1', attempts: 1 })
  await q.add('send', { to: EVIL }, { jobId: 'evil', attempts: 1 })
  for (let i = 0; i < 5; i++) await q.add('send', { to: `user${i}@example.com` }, { jobId: `ok-${i}`, removeOnComplete: false })
  const w = worker(
    'emails',
    async (job) => {
      await job.log(`connecting for ${job.id}`)
      if (job.id === 'welcome-1' || job.id === 'evil') throw new Error('550 mailbox unavailable')
      return { sent: true }
    },
    { name: 'mailer-1' },
  )
  await waitFor(async () => (await q.counts()).failed === 2 && (await q.counts()).completed === 5, { what: 'the seeded jobs to finish' })
  await w.close()
  await q.add('digest', { week: 48 }, { jobId: 'digest-48', delay: 3_600_000 })
  await crashedJobs(redis.client, 'emails', 2)
  await sweep(redis.client, 'emails', { graceMs: 60_000 })
  const sms = open('sms')
  await sms.add('text', { to: '+331234' }, { delay: 90_000 })
  await sms.pause()
  return q
}

function dashboard(refreshMs = 300): Promise<TestDashboard> {
  return serve({ refreshMs })
}

/** `echomq ui` as a process, with the URL it prints. */
async function echomqUi(args: string[]): Promise<string> {
  const child: ChildProcess = spawn(process.execPath, [BIN, 'ui', '--port', '0', '--redis-url', redis.url, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()))
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()))
  cleanup.push(async () => {
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  })
  return waitFor(() => /on (http:\/\/\S+\/)/.exec(output)?.[1], {
    what: `echomq ui to print its URL (output: ${output})`,
    timeoutMs: 20_000,
  })
}

async function screenshot(page: Page, name: string): Promise<void> {
  const file = path.join(SHOTS, name)
  await page.screenshot({ path: file, fullPage: false })
  expect(statSync(file).size).toBeGreaterThan(5_000)
  expect(statSync(file).size).toBeLessThan(250_000)
  if (process.env.UPDATE_SCREENSHOTS === '1') copyFileSync(file, path.join(DOCS, name))
}

describe('the dashboard in Chromium', () => {
  it('the overview shows each queue with its counts and paused state, and keeps them current', async () => {
    const q = await seed()
    const d = await dashboard()
    const page = await newPage()
    await page.goto(d.url)

    expect(await page.locator('[data-live="emails|failed"]').textContent()).toBe('2')
    expect(await page.locator('[data-live="emails|completed"]').textContent()).toBe('5')
    expect(await page.locator('[data-live="emails|delayed"]').textContent()).toBe('1')
    expect(await page.locator('[data-live="emails|active"]').textContent()).toBe('2')
    expect(await page.locator('[data-live="emails|stalled"]').textContent()).toBe('2')
    expect(await page.locator('[data-live="sms|paused"]').textContent()).toBe('paused')
    expect(await page.locator('.chart rect.f[height]:not([height="0"])').count()).toBeGreaterThan(0)
    await screenshot(page, 'ui-overview.png')

    // A job fails while the page is open: the count changes without a reload.
    await q.add('send', {}, { jobId: 'late', attempts: 1 })
    const _w = worker('emails', () => {
      throw new Error('late failure')
    })
    const failed = page.locator('[data-live="emails|failed"]')
    await waitFor(async () => (await failed.textContent()) === '3', { what: 'the failed count to refresh', intervalMs: 100 })
    // Times are relative with the absolute time in UTC beside them, the exact local time on hover.
    await page.goto(`${d.url}queues/emails?state=failed`)
    const time = page.locator('main time').first()
    expect(await time.textContent()).toMatch(/^(now|\d+ (ms|s|min) ago) \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(await time.getAttribute('title')).toMatch(/\d{4}-\d\d-\d\dT[\d:.]+Z\)$/)
  })

  it('a failed job is retried from its page: its state changes to wait, then to completed while the page is open', async () => {
    const q = await seed()
    const d = await dashboard()
    const page = await newPage()
    await page.goto(`${d.url}queues/emails/jobs/welcome-1`)
    expect(await page.locator('[data-live="state"]').textContent()).toBe('failed')
    expect(await page.locator('pre.error').first().textContent()).toBe('550 mailbox unavailable')
    await screenshot(page, 'ui-job.png')

    await page.getByRole('button', { name: 'Retry' }).click()
    await page.waitForURL(/done=retried/)
    expect(await page.locator('[data-live="state"]').textContent()).toBe('wait')
    expect(await page.locator('.note.done').textContent()).toContain('Retried 1 job')
    expect((await q.getJob('welcome-1'))?.state).toBe('wait')

    const _w = worker('emails', () => ({ sent: true }), { name: 'mailer-2' })
    const state = page.locator('[data-live="state"]')
    await waitFor(async () => (await state.textContent()) === 'completed', { what: 'the state to refresh', intervalMs: 100 })
    expect(await page.locator('#stale').isVisible()).toBe(true)
  })

  it('a <script> in job data, name, error or log is shown as text and never runs', async () => {
    await seed()
    const d = await dashboard()
    const page = await newPage()
    for (const url of [`${d.url}queues/emails/jobs/evil`, `${d.url}queues/emails?state=failed`]) {
      await page.goto(url)
      expect(await page.evaluate('window.__pwned')).toBeUndefined()
    }
    await page.goto(`${d.url}queues/emails/jobs/evil`)
    expect(await page.locator('section[aria-labelledby="data-title"] pre').textContent()).toContain(EVIL)
  })

  it("a POST without the page's token is refused: from the page's own origin, and from another site's form", async () => {
    const q = await seed()
    const d = await dashboard()
    const page = await newPage()
    await page.goto(d.url)
    const status = await page.evaluate(`fetch('queues/emails', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'action=pause&back=overview',
    }).then((res) => res.status)`)
    expect(status).toBe(403)

    // Another site's page whose form posts to the dashboard as soon as it loads (cross-site request forgery).
    const attacker = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html')
      res.end(`<form id="f" method="post" action="${d.url}queues/emails"><input name="action" value="pause">
<input name="token" value="guessed"></form><script>document.getElementById('f').submit()</script>`)
    })
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve))
    cleanup.push(
      () =>
        new Promise((resolve) => {
          attacker.close(resolve)
          attacker.closeAllConnections()
        }),
    )
    const response = page.waitForResponse((r) => r.url() === `${d.url}queues/emails` && r.request().method() === 'POST')
    await page.goto(`http://localhost:${(attacker.address() as AddressInfo).port}/`)
    expect((await response).status()).toBe(403)
    expect(await q.isPaused()).toBe(false)
  })

  it('echomq ui --read-only shows no action on any page', async () => {
    await seed()
    const url = await echomqUi(['--read-only'])
    const page = await newPage()
    for (const p of [
      '',
      'queues/emails?state=failed',
      'queues/emails?state=delayed',
      'queues/emails?state=completed',
      'queues/emails/jobs/welcome-1',
    ]) {
      await page.goto(url + p)
      expect(await page.locator('form[method="post"]').count()).toBe(0)
      const buttons = await page.locator('button').allTextContents()
      expect(buttons.filter((b) => b !== 'Find')).toEqual([])
    }
    expect(await page.locator('.badge', { hasText: 'read-only' }).count()).toBe(1)
  })

  it('usable by keyboard, readable in dark mode', async () => {
    await seed()
    const d = await dashboard()
    const page = await newPage()
    await page.goto(d.url)
    await page.keyboard.press('Tab')
    const focused = () => page.evaluate('document.activeElement?.textContent')
    expect(await focused()).toBe('Skip to content')
    // Tab to the first queue's link and open it with Enter.
    await page.keyboard.press('Tab')
    await page.keyboard.press('Tab')
    let found = false
    for (let i = 0; i < 10 && !found; i++) {
      found = (await focused()) === 'emails'
      if (!found) await page.keyboard.press('Tab')
    }
    expect(found).toBe(true)
    await page.keyboard.press('Enter')
    await page.waitForURL(/\/queues\/emails$/)

    const background = () => page.evaluate('getComputedStyle(document.body).backgroundColor')
    const light = await background()
    await page.emulateMedia({ colorScheme: 'dark' })
    const dark = await background()
    expect(dark).not.toBe(light)
    expect(dark).toBe('rgb(22, 24, 27)')
  })

  it('the operator view: a red banner while Redis may evict keys, a queue with no worker flagged, the workers table', async () => {
    const orphan = open('reports')
    await orphan.add('build', {})
    const jobs = open('thumbs')
    const _w = worker('thumbs', () => undefined, { name: 'thumbnailer-1' })
    await waitFor(async () => (await jobs.getWorkersCount()) === 1, { what: 'the worker connected' })
    await redis.client.config('SET', 'maxmemory-policy', 'allkeys-lru')
    cleanup.push(() => redis.client.config('SET', 'maxmemory-policy', 'noeviction'))
    const d = await dashboard()
    const page = await newPage()
    await page.goto(d.url)

    const banner = page.locator('[data-banner="maxmemory-policy"]')
    expect(await banner.isVisible()).toBe(true)
    expect(await banner.getAttribute('role')).toBe('alert')
    expect(await banner.textContent()).toContain('allkeys-lru')
    const style = (selector: string, property: string) =>
      page.evaluate(`getComputedStyle(document.querySelector('${selector}')).${property}`)
    expect(await style('[data-banner]', 'borderTopColor')).toBe('rgb(179, 38, 30)')
    const none = page.locator('[data-live="reports|workers"]')
    expect(await none.textContent()).toBe('none')
    expect(await style('[data-live="reports|workers"]', 'backgroundColor')).toBe('rgb(179, 38, 30)')
    expect(await page.locator('[data-live="thumbs|workers"]').textContent()).toBe('1')
    // A worker connects: the cell refreshes to its count and is no longer red.
    const _late = worker('reports', () => undefined, { name: 'reporter-1' })
    await waitFor(async () => (await none.textContent()) === '1' && !(await none.getAttribute('class'))?.includes('danger'), {
      what: 'the Workers cell to refresh',
      intervalMs: 100,
    })

    await page.getByRole('link', { name: 'Workers and Redis' }).click()
    await page.waitForURL(/\/workers$/)
    const row = page.locator('table.workers tbody tr', { hasText: 'thumbnailer-1' })
    expect(await row.locator('td').first().textContent()).toBe('thumbs')
    expect(await row.locator('td').nth(1).textContent()).toBe('127.0.0.1')
    // Last seen: relative, kept current by the script, with the absolute time in UTC beside it.
    expect(await row.locator('time .rel').textContent()).toMatch(/^(now|\d+ s ago)$/)
    expect(await row.locator('time .abs').textContent()).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(await page.locator('table.health code.bad').textContent()).toBe('allkeys-lru')
    expect(await page.locator('[data-banner="maxmemory-policy"]').isVisible()).toBe(true)
    await screenshot(page, 'ui-workers.png')
  })
})
