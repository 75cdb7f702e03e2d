/** Small shared helpers: the benchmark context, sleeping, medians, timing. */
import type { BenchRedis } from './redis.js'

export interface Ctx {
  redis: BenchRedis
  quick: boolean
  log(message: string): void
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

export const ratio = (a: number, b: number) => (b === 0 ? (a === 0 ? 1 : Infinity) : a / b)

/** Counts calls of an async function and round trips: a round trip starts when a call is made while none is in flight. */
export function countRoundTrips<A extends unknown[], R>(fn: (...args: A) => Promise<R>) {
  const counter = { calls: 0, roundTrips: 0, inFlight: 0 }
  const wrapped = async (...args: A): Promise<R> => {
    counter.calls++
    if (counter.inFlight++ === 0) counter.roundTrips++
    try {
      return await fn(...args)
    } finally {
      counter.inFlight--
    }
  }
  return { counter, wrapped, reset: () => Object.assign(counter, { calls: 0, roundTrips: 0 }) }
}

/** Resolves when `done()` is true, polling every `everyMs`; rejects after `timeoutMs`. */
export async function until(done: () => boolean, what: string, timeoutMs = 300_000, everyMs = 2): Promise<void> {
  const start = Date.now()
  while (!done()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}
