/**
 * What a worker tells its listeners about its connection: an outage once, when it starts (calls wait
 * through reconnects before they fail), and `ready` the first time the connection answers.
 */
import type { RunContext } from './context.js'

export function watchConnection(core: RunContext): void {
  const client = core.conn.client
  let reported = false
  let ready = false
  const onError = (err: Error) => {
    if (reported || core.phase !== 'running') return
    reported = true
    core.report(core.failure('connect to Redis (retrying) for queue', err))
  }
  const onReady = () => {
    reported = false
    if (!ready) {
      ready = true
      core.notify('ready')
    }
  }
  client.on('error', onError)
  client.on('ready', onReady)
  // A connection given to the worker outlives it (a worker function's, reused by each invocation's worker).
  core.unwatch = () => {
    client.off('error', onError)
    client.off('ready', onReady)
  }
}
