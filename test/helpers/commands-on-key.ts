/**
 * The commands Redis runs on one key while a call runs, scripts' included, from MONITOR: how often a script
 * reads and writes a job's hash, apart from the queue-wide reads each call makes.
 */
import type { Redis } from 'ioredis'

/** The commands Redis ran (scripts' included) on `key` during `run`, by name. */
export async function commandsOnKey<T>(
  client: Redis,
  key: string,
  run: () => Promise<T>,
): Promise<{ result: T; calls: Record<string, number> }> {
  const monitor = await client.monitor()
  const calls: Record<string, number> = {}
  let ended: () => void = () => undefined
  const end = new Promise<void>((resolve) => {
    ended = resolve
  })
  monitor.on('monitor', (_time: string, args: string[]) => {
    const name = (args[0] as string).toLowerCase()
    if (name === 'echo' && args[1] === 'feed-end') ended()
    else if (args[1] === key) calls[name] = (calls[name] ?? 0) + 1
  })
  try {
    const result = await run()
    // MONITOR's feed comes apart from the replies: an ECHO after the run marks where it ends.
    await client.echo('feed-end')
    await end
    return { result, calls }
  } finally {
    monitor.disconnect()
  }
}
