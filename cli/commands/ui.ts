/**
 * `echomq ui`: the web dashboard (lib/ui/) on its own server until SIGINT or SIGTERM. The Redis comes as
 * for every command (--redis-url, REDIS_URL, the SSM parameter, the local default), so TLS, ACL users and
 * redis+cluster:// URLs work alike. It binds 127.0.0.1 unless told otherwise, and refuses another host
 * without --auth (serveDashboard's rule). Named queues must exist (registered or holding jobs), as for
 * `stats --queue`: a mistyped name is an error, never added to the registry.
 */
import { queueExists } from '../../lib/read-model.js'
import { parseAuth } from '../../lib/ui/options.js'
import { serveDashboard, UI_HOST_DEFAULT, UI_PORT_DEFAULT } from '../../lib/ui/server.js'
import { command } from '../command.js'
import { CliError, messageOf } from '../errors.js'
import { out } from '../format.js'
import { prefixOf, queueNames } from '../input.js'
import { redisUrlOf, withClient } from '../redis.js'
import { unknownQueue } from '../reports/job-lists.js'

export const ui = command({
  summary: 'serve the web dashboard: queues, leases, failures, and actions on them',
  usage: `echomq ui [--port ${UI_PORT_DEFAULT}] [--host ${UI_HOST_DEFAULT}] [--queue q ...] [--read-only] [--auth user:password]

Serves the dashboard until stopped (Ctrl-C): every queue with its counts, a queue's jobs by state, each
job with its data, errors, logs and lease, in-flight jobs by worker, delayed jobs, a chart of the last
hour; and retry, remove, promote, clean, pause and resume. Binds 127.0.0.1: another host needs --auth.

  --port <n>               port to listen on (default ${UI_PORT_DEFAULT}; 0 picks a free one)
  --host <address>         address to bind (default ${UI_HOST_DEFAULT}); anything but loopback needs --auth
  --queue <q>              queue to show (repeatable or comma list; default every registered queue)
  --read-only              show no action and refuse every POST
  --auth <user:password>   HTTP Basic on every request (default: ECHOMQ_UI_AUTH, else none)
  --grace <ms>             the sweep's grace, to say when a marked job is recovered (default 15000)`,
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    queue: { type: 'string', multiple: true },
    'read-only': { type: 'boolean', default: false },
    auth: { type: 'string' },
    grace: { type: 'string' },
  },
  async run(values) {
    const port = values.port === undefined ? UI_PORT_DEFAULT : Number(values.port)
    if (values.port !== undefined && (!/^\d{1,5}$/.test(values.port) || port > 65_535))
      throw new CliError(`--port expects a port from 0 to 65535, got: ${values.port}`, true)
    if (values.grace !== undefined && !/^\d{1,7}$/.test(values.grace))
      throw new CliError(`--grace expects a whole number of ms, got: ${values.grace}`, true)
    const rawAuth = values.auth ?? process.env.ECHOMQ_UI_AUTH
    let auth: ReturnType<typeof parseAuth> | undefined
    try {
      auth = rawAuth === undefined || rawAuth === '' ? undefined : parseAuth(rawAuth)
    } catch (err) {
      throw new CliError(`--auth: ${messageOf(err)}`, true)
    }
    const queues = queueNames(values.queue)
    const prefix = prefixOf(values)
    const { url } = await redisUrlOf(values)
    if (queues) {
      await withClient(url, async (client) => {
        for (const q of queues) if (!(await queueExists(client, prefix, q))) throw unknownQueue(q, prefix)
      })
    }
    const served = await serveDashboard({
      connection: url,
      prefix,
      host: values.host ?? UI_HOST_DEFAULT,
      port,
      readOnly: values['read-only'],
      ...(queues ? { queues } : {}),
      ...(auth ? { auth } : {}),
      ...(values.grace === undefined ? {} : { graceMs: Number(values.grace) }),
    })
    out(
      values.json
        ? JSON.stringify({ url: served.url, readOnly: values['read-only'] })
        : `EchoMQ dashboard on ${served.url} (Ctrl-C to stop)`,
    )
    await new Promise<void>((resolve) => {
      const stop = () => resolve()
      process.once('SIGINT', stop)
      process.once('SIGTERM', stop)
    })
    await served.close()
  },
})
