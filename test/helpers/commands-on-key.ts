/**
 * The commands Redis runs on one key while a call runs, scripts' included, from MONITOR: how often a script
 * reads and writes a job's hash, apart from the queue-wide reads each call makes.
 */
import type { Redis } from 'ioredis'

/**
 * Runs `run` while MONITOR feeds `seen` every command Redis runs (scripts' included: their `source` is
 * "lua"), and returns once the feed has caught up with it: the feed comes apart from the replies, so an ECHO
 * after the run marks its end.
 */
export async function monitorDuring<T>(
  client: Redis,
  seen: (name: string, args: string[], source: string) => void,
  run: () => Promise<T>,
): Promise<T> {
  const monitor = await client.monitor()
  let ended: () => void = () => undefined
  const end = new Promise<void>((resolve) => {
    ended = resolve
  })
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const name = (args[0] as string).toLowerCase()
    if (name === 'echo' && args[1] === 'feed-end') ended()
    else seen(name, args, source)
  })
  try {
    const result = await run()
    await client.echo('feed-end')
    await end
    return result
  } finally {
    monitor.disconnect()
  }
}

/** The commands Redis ran (scripts' included) on `key` during `run`, by name. */
export async function commandsOnKey<T>(
  client: Redis,
  key: string,
  run: () => Promise<T>,
): Promise<{ result: T; calls: Record<string, number> }> {
  const calls: Record<string, number> = {}
  const result = await monitorDuring(
    client,
    (name, args) => {
      if (args[1] === key) calls[name] = (calls[name] ?? 0) + 1
    },
    run,
  )
  return { result, calls }
}
