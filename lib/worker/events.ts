/**
 * What a worker tells its listeners about its connection: an outage once, when it starts (calls wait
 * through reconnects before they fail), and `ready` the first time the connection answers.
 */
import { watchOutages } from '../redis/outages.js'
import type { RunContext } from './context.js'

export function watchConnection(core: RunContext): void {
  const client = core.conn.client
  let ready = false
  const onReady = () => {
    if (ready) return
    ready = true
    core.notify('ready')
  }
  const unwatch = watchOutages(client, (err) => {
    if (core.phase === 'running') core.report(core.failure('connect to Redis (retrying) for queue', err))
  })
  client.on('ready', onReady)
  // A connection given to the worker outlives it (a worker function's, reused by each invocation's worker).
  core.unwatch = () => {
    unwatch()
    client.off('ready', onReady)
  }
}
