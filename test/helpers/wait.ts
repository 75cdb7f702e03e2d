/** Polls a condition until it holds or a deadline passes: synchronisation without fixed sleeps. */
export async function waitFor<T>(
  check: () => Promise<T | false | undefined | null> | T | false | undefined | null,
  { timeoutMs = 10_000, intervalMs = 10, what = 'condition' }: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = performance.now() + timeoutMs
  let lastError: unknown
  for (;;) {
    try {
      const value = await check()
      if (value) return value
    } catch (err) {
      lastError = err
    }
    if (performance.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`)
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

/** Resolves with the arguments of the next `event` emitted by `emitter`. */
export function nextEvent<T extends unknown[]>(emitter: { once(event: never, fn: never): unknown }, event: string): Promise<T> {
  // Typed emitters (Worker, Queue, QueueEvents) take only their own event names: the caller names one.
  const once = emitter.once.bind(emitter) as unknown as (event: string, fn: (...args: T) => void) => unknown
  return new Promise((resolve) => once(event, (...args: T) => resolve(args)))
}
