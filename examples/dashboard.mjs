import { createServer } from 'node:http'
import { Queue } from 'echomq'
import { createDashboard } from 'echomq/dashboard'

const connection = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const queue = new Queue('emails', { connection })
const job = await queue.add('send', { to: 'ada@example.com' })

// The dashboard as a request handler under /admin/queues; anything else goes on to the app (here a 404).
const dashboard = createDashboard({ connection, basePath: '/admin/queues', readOnly: true })
const server = createServer((req, res) => dashboard(req, res, () => res.writeHead(404).end()))
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const base = `http://127.0.0.1:${server.address().port}`

const page = await fetch(`${base}/admin/queues/queues/emails/jobs/${job.id}`)
console.log(page.status, (await page.text()).includes('ada@example.com')) // 200 true
console.log((await fetch(`${base}/elsewhere`)).status) // 404

server.close()
await dashboard.close()
await queue.close()
