/**
 * The dashboard's pages for job schedulers and priorities, on real queues: the delayed page lists the
 * schedulers (what each repeats, when it next adds a job, its limit and template), the prioritized tab
 * lists waiting jobs with a priority in the order they will run, and promoting a scheduler's pending
 * iteration from the dashboard runs it now and keeps the schedule going.
 */
import { describe, expect, it } from 'vitest'
import { Live } from '../../lib/ui/layout.js'
import { renderSchedules, schedulerViews } from '../../lib/ui/schedules.js'
import { useDashboards } from '../helpers/dashboard.js'
import { useQueues } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'

const NOW = Date.UTC(2026, 11, 1, 12, 0, 0)

describe('the schedules list', () => {
  it('renders markup in any field as text', () => {
    const evil = '<script>alert(1)</script>'
    const html = renderSchedules(
      schedulerViews([
        { key: evil, name: evil, next: NOW, iterationCount: 0, offset: 0, pattern: evil, tz: evil, template: { data: evil } },
      ]),
      new Live(NOW),
    ).text
    expect(html).not.toContain('<script>')
    expect(html.match(/&lt;script&gt;/g)?.length).toBeGreaterThanOrEqual(5)
    expect(renderSchedules([], new Live(NOW)).text).toContain('No job schedulers.')
  })
})

describe('on a real queue', () => {
  const redis = useRedis()
  const { open: openQueue } = useQueues(redis)
  const dashboard = useDashboards(redis)

  it("the delayed page lists the queue's schedulers: cron with its zone, every n ms, the next job, limit, template", async () => {
    const q = openQueue('emails')
    await q.upsertJobScheduler('nightly', { pattern: '0 3 * * *', tz: 'Europe/Paris' }, { name: 'report', data: { kind: 'full' } })
    await q.upsertJobScheduler('ping', { every: 60_000, limit: 100 }, { name: 'ping' })
    const d = await dashboard()
    const page = (await d.get('/queues/emails?state=delayed')).text
    expect(page).toContain('<h2 id="schedules-title">Schedules</h2>')
    expect(page).toContain('<code>nightly</code>')
    expect(page).toContain('cron <code>0 3 * * *</code> (Europe/Paris)')
    expect(page).toContain('every 60,000 ms')
    expect(page).toContain('<td>100</td>')
    expect(page).toContain('&quot;kind&quot;: &quot;full&quot;')
    // Other states do not show them.
    expect((await d.get('/queues/emails?state=failed')).text).not.toContain('schedules-title')
  })

  it('the prioritized tab lists jobs with a priority in the order they will run; the counts keep them apart from waiting', async () => {
    const q = openQueue('emails')
    await q.add('plain', {}, { jobId: 'plain' })
    await q.add('low', {}, { jobId: 'low', priority: 9 })
    await q.add('high', {}, { jobId: 'high', priority: 1 })
    const d = await dashboard()
    const page = (await d.get('/queues/emails?state=prioritized')).text
    expect(page.indexOf('<code>high</code>')).toBeGreaterThan(0)
    expect(page.indexOf('<code>high</code>')).toBeLessThan(page.indexOf('<code>low</code>'))
    expect(page).not.toContain('<code>plain</code>')
    expect(page).toMatch(/Prioritized <span data-live="count\|prioritized">2</)
    expect(page).toMatch(/Waiting <span data-live="count\|wait">1</)
    expect((await d.get('/')).text).toMatch(/data-live="emails\|prioritized">2</)
  })

  it("promoting a scheduler's pending run from its job page runs it now, and the schedule moves on", async () => {
    const q = openQueue('emails')
    await q.upsertJobScheduler('hourly', { pattern: '0 * * * *' }, { name: 'tick' })
    const pending = await q.getJobs('delayed', { start: 0, end: 0 })
    const id = pending[0]?.id as string
    expect(id).toMatch(/^repeat:hourly:\d+$/)
    const d = await dashboard()
    const res = await d.post(`/queues/emails/jobs/${encodeURIComponent(id)}`, { action: 'promote', token: await d.token() })
    expect(res.status).toBeLessThan(400)
    expect((await q.getJob(id))?.state).toBe('wait')
    const next = (await q.getJobScheduler('hourly'))?.next as number
    expect(next - Number(id.split(':')[2])).toBe(3_600_000)
    // Made when a worker starts the promoted run, or when it falls due (BullMQ's one pending run).
    expect(await q.getJob(`repeat:hourly:${next}`)).toBeUndefined()
  })
})
