/**
 * The parts of the dashboard that light up when the library grows them: the schedules list (job
 * schedulers in BullMQ's shape) rendered from fake objects, and, on a real queue, the delayed page and
 * the counts once a Queue has getJobSchedulers and counts a `prioritized` state (added to the prototype
 * here, as the library will).
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { Queue, type QueueCounts } from '../lib/index.js'
import { Live } from '../lib/ui/layout.js'
import { renderSchedules, schedulerViews } from '../lib/ui/schedules.js'
import { startDashboard } from './helpers/dashboard.js'
import { useRedis } from './helpers/redis-server.js'

const NOW = Date.UTC(2026, 11, 1, 12, 0, 0)

describe('the schedules list', () => {
  it('renders each scheduler: key, job name, cron with its zone or every n ms, the next job relative, limit, template', () => {
    const views = schedulerViews([
      {
        key: 'nightly',
        name: 'report',
        next: NOW + 90_000,
        pattern: '0 3 * * *',
        tz: 'Europe/Paris',
        template: { data: { kind: 'full' } },
      },
      { key: 'ping', name: 'ping', next: String(NOW + 5_000), every: 5_000, limit: 100 },
    ])
    const html = renderSchedules(views, new Live(NOW)).text
    expect(html).toContain('<code>nightly</code>')
    expect(html).toContain('cron <code>0 3 * * *</code> (Europe/Paris)')
    expect(html).toContain('every 5,000 ms')
    expect(html).toMatch(/data-live-time="scheduler-0" data-kind="ago" data-at="\d+"[^>]*>in 1 min</)
    expect(html).toMatch(/data-live-time="scheduler-1"[^>]*>in 5 s</)
    expect(html).toContain('<td>100</td>')
    expect(html).toContain('&quot;kind&quot;: &quot;full&quot;')
  })

  it('renders markup in any field as text', () => {
    const evil = '<script>alert(1)</script>'
    const html = renderSchedules(
      schedulerViews([{ key: evil, name: evil, pattern: evil, tz: evil, template: { data: evil } }]),
      new Live(NOW),
    ).text
    expect(html).not.toContain('<script>')
    expect(html.match(/&lt;script&gt;/g)?.length).toBeGreaterThanOrEqual(5)
  })

  it('keeps only what it can show: entries without a key, and fields of the wrong type, are left out', () => {
    expect(schedulerViews(undefined)).toEqual([])
    expect(schedulerViews([null, 3, { name: 'no key' }, { key: 'k', next: 'soon', every: -1, limit: '7', tz: 5 }])).toEqual([
      { key: 'k', every: -1, limit: 7 },
    ])
    expect(renderSchedules([], new Live(NOW)).text).toContain('No job schedulers.')
  })
})

describe('on a queue whose library has them', () => {
  const redis = useRedis()
  afterEach(() => {
    vi.restoreAllMocks()
    delete (Queue.prototype as unknown as Record<string, unknown>).getJobSchedulers
  })

  it('the delayed page lists the schedulers getJobSchedulers returns; the counts show prioritized', async () => {
    const calls: unknown[][] = []
    Object.assign(Queue.prototype, {
      getJobSchedulers(...args: unknown[]) {
        calls.push(args)
        return Promise.resolve([{ key: 'every-minute', name: 'tick', every: 60_000, next: Date.now() + 30_000 }])
      },
    })
    const counts = Queue.prototype.counts
    vi.spyOn(Queue.prototype, 'counts').mockImplementation(async function (this: Queue) {
      return { ...(await counts.call(this)), prioritized: 4 } as QueueCounts
    })
    const q = new Queue('emails', { connection: redis.client })
    await q.add('later', {}, { delay: 60_000 })
    const d = await startDashboard({ connection: redis.url })
    try {
      const page = (await d.get('/queues/emails?state=delayed')).text
      expect(page).toContain('<h2 id="schedules-title">Schedules</h2>')
      expect(page).toContain('<code>every-minute</code>')
      expect(page).toContain('every 60,000 ms')
      expect(calls).toEqual([[0, 99, true]])
      expect(page).toContain('Prioritized: <span data-live="count|prioritized">4</span>')
      expect((await d.get('/')).text).toMatch(/data-live="emails\|prioritized">4</)
      // Other states do not ask for schedulers.
      await d.get('/queues/emails?state=failed')
      expect(calls).toHaveLength(1)
    } finally {
      await d.served.close()
      await q.close()
    }
  })
})
