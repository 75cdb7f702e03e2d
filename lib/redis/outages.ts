/**
 * A connection's outages, as its owner reports them: once each (the first error since the connection was
 * last ready), since ioredis emits an error for every failed reconnect and the calls meanwhile wait through
 * the reconnects anyway.
 */
import type { RedisClient } from './connection.js'

/** Calls `onOutage` with the first error of each outage of `client`; returns what stops watching. */
export function watchOutages(client: RedisClient, onOutage: (err: Error) => void): () => void {
  let reported = false
  const onError = (err: Error) => {
    if (reported) return
    reported = true
    onOutage(err)
  }
  const onReady = () => {
    reported = false
  }
  client.on('error', onError)
  client.on('ready', onReady)
  return () => {
    client.off('error', onError)
    client.off('ready', onReady)
  }
}
