/** Small shared helpers: the benchmark context, sleeping, medians and spreads, alternating runs, timing. */
import type { EventEmitter } from 'node:events'
import type { Worker as BullWorker } from 'bullmq'
import type { Worker } from '../lib/index.js'
import { BULL_PREFIX, EMQ_PREFIX } from './build.js'
import type { BenchRedis } from './redis.js'

export interface Ctx {
  redis: BenchRedis
  quick: boolean
  log(message: string): void
}

/** Runs per side behind every EchoMQ/BullMQ ratio: one run on this 2-core machine varies by a third. */
export const ROUNDS = 3

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

/** The q-quantile (0..1) by the nearest-rank method. */
export function quantile(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b)
  if (s.length === 0) return NaN
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] as number
}

export const ratio = (a: number, b: number) => (b === 0 ? (a === 0 ? 1 : Infinity) : a / b)

/** A figure measured in several runs: the median and the range. */
export interface Spread {
  median: number
  min: number
  max: number
  runs: number[]
}

export function spread(runs: number[]): Spread {
  return { median: median(runs), min: Math.min(...runs), max: Math.max(...runs), runs }
}

/** The spread of a figure of each run. */
export const spreadOf = <T>(runs: T[], figure: (run: T) => number): Spread => spread(runs.map(figure))

/** The spread of run-by-run ratios a[i] / b[i] (run i of each side ran back to back). */
export const ratios = <T>(a: T[], b: T[], figure: (run: T) => number): Spread =>
  spread(a.map((run, i) => ratio(figure(run), figure(b[i] as T))))

/**
 * Runs every side once per round, in the order given, for `rounds` rounds (EchoMQ, BullMQ, EchoMQ,
 * BullMQ, ...), so slow spells of the machine hit both sides alike. Returns each side's runs in order.
 */
export async function alternate<K extends string, T>(
  rounds: number,
  sides: Record<K, (round: number) => Promise<T>>,
): Promise<Record<K, T[]>> {
  const names = Object.keys(sides) as K[]
  const out = Object.fromEntries(names.map((n) => [n, [] as T[]])) as Record<K, T[]>
  for (let round = 0; round < rounds; round++) for (const n of names) out[n].push(await sides[n](round))
  return out
}

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

/** A promise settled from outside, e.g. by event handlers: `one()` per completed item, `fail(err)`. */
export function completion(total: number, what: string, timeoutMs = 180_000) {
  let done = 0
  let resolve!: () => void
  let reject!: (err: Error) => void
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  const timer = setTimeout(() => reject(new Error(`${what}: ${done} of ${total} done after ${timeoutMs} ms`)), timeoutMs)
  if (total === 0) resolve()
  return {
    promise: promise.finally(() => clearTimeout(timer)),
    get done() {
      return done
    },
    one: () => {
      if (++done === total) resolve()
    },
    fail: (err: unknown) => reject(err instanceof Error ? err : new Error(String(err))),
  }
}

/** Passes each job the worker (either side's) completes to `onCompleted`; a failed job or an error to `onFailure`. */
export function watchWorker(worker: Worker | BullWorker, onCompleted: () => void, onFailure: (err: unknown) => void): void {
  // Both are EventEmitters; BullMQ's typed `on` and EchoMQ's plain one do not unify.
  const events = worker as unknown as EventEmitter
  events.on('completed', onCompleted)
  events.on('failed', (_job: unknown, err: unknown) => onFailure(err))
  events.on('error', onFailure)
}

/** A job's data of exactly `bytes` bytes as JSON. */
export function payload(i: number, bytes = 100): { i: number; pad: string } {
  const bare = JSON.stringify({ i, pad: '' }).length
  return { i, pad: 'x'.repeat(Math.max(0, bytes - bare)) }
}

/** Where a forked worker or producer finds its queue: the library, the queue, its prefix and the Redis. */
export interface QueueTarget {
  lib: 'emq' | 'bull'
  queue: string
  prefix: string
  host: string
  port: number
}

/** The target of `queue` on the bench's Redis, under the library's prefix. */
export function queueTarget(ctx: Ctx, lib: 'emq' | 'bull', queue: string): QueueTarget {
  return { lib, queue, prefix: lib === 'emq' ? EMQ_PREFIX : BULL_PREFIX, host: ctx.redis.host, port: ctx.redis.port }
}
