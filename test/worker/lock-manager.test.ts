/** The LockManager with an injected clock: ticks, batching, loss and close, with no real waiting. */
import { describe, expect, it } from 'vitest'
import type { LeaseStatus, Renewal } from '../../lib/redis/commands.js'
import { type Lease, LockManager } from '../../lib/worker/lock-manager.js'
import { ManualClock } from '../helpers/manual-clock.js'

function setup(reply: (batch: Lease[]) => Promise<LeaseStatus[]> = async (b) => b.map(() => 'renewed'), batchSize?: number) {
  const clock = new ManualClock()
  const calls: Renewal[][] = []
  const lost: [string, string][] = []
  const errors: unknown[] = []
  const manager = new LockManager({
    extend: (batch) => {
      calls.push(batch)
      return reply(batch)
    },
    intervalMs: 100,
    leaseMs: 300,
    clock,
    onLost: (id, reason) => lost.push([id, reason]),
    onError: (err) => errors.push(err),
    ...(batchSize ? { batchSize } : {}),
  })
  return { clock, calls, lost, errors, manager }
}

describe('LockManager', () => {
  it('renews every lease once per tick, in batches no larger than batchSize', async () => {
    const { clock, calls, manager } = setup(undefined, 500)
    for (let i = 0; i < 1200; i++) manager.add({ id: `j${i}`, token: 't' }, 0)
    manager.start()

    await clock.advance(100)

    expect(calls.map((b) => b.length)).toEqual([500, 500, 200])
    await clock.advance(100)
    expect(calls).toHaveLength(6)
    await manager.close()
  })

  it('refreshes the lease index of about half the leases each tick, each lease every other tick', async () => {
    const { clock, calls, manager } = setup()
    for (let i = 0; i < 4; i++) manager.add({ id: `j${i}`, token: 't' }, 0)
    manager.start()

    for (let t = 0; t < 4; t++) await clock.advance(100)

    const indexed = calls.map((batch) => batch.filter((r) => r.index).map((r) => r.id))
    expect(indexed.map((ids) => ids.length)).toEqual([2, 2, 2, 2])
    expect(indexed[0]).toEqual(indexed[2])
    expect(indexed[1]).toEqual(indexed[3])
    expect(new Set([...(indexed[0] ?? []), ...(indexed[1] ?? [])]).size).toBe(4)
    await manager.close()
  })

  it('does not call Redis when it holds no lease', async () => {
    const { clock, calls, manager } = setup()
    manager.start()
    await clock.advance(1000)
    expect(calls).toHaveLength(0)
    await manager.close()
  })

  it('reports a lease the script found lost and stops renewing it', async () => {
    const { clock, calls, lost, manager } = setup(async (b) => b.map((l) => (l.id === 'gone' ? 'lost' : 'renewed')))
    manager.add({ id: 'gone', token: 't' }, 0)
    manager.add({ id: 'kept', token: 't' }, 0)
    manager.start()

    await clock.advance(100)
    await clock.advance(100)

    expect(lost.map(([id]) => id)).toEqual(['gone'])
    expect(calls[1]?.map((l) => l.id)).toEqual(['kept'])
    await manager.close()
  })

  it('when renewals fail, reports the error each tick and the lease lost once its deadline passes', async () => {
    const { clock, lost, errors, manager } = setup(async () => {
      throw new Error('connection refused')
    })
    manager.add({ id: 'a', token: 't' }, 0) // deadline 300
    manager.start()

    await clock.advance(200)
    expect(errors).toHaveLength(2)
    expect(lost).toEqual([])
    await clock.advance(100)

    expect(lost).toEqual([['a', 'the lease could not be renewed before it expired']])
    await manager.close()
  })

  it('never overlaps ticks: the next one is armed after the slow one settles', async () => {
    let release: (() => void) | undefined
    const { clock, calls, manager } = setup((b) => new Promise((resolve) => (release = () => resolve(b.map(() => 'renewed' as const)))))
    manager.add({ id: 'a', token: 't' }, 0)
    manager.start()

    await clock.advance(250) // the first tick (at 100) is still waiting for its reply
    expect(calls).toHaveLength(1)
    release?.()
    await clock.advance(100)
    expect(calls).toHaveLength(2)
    release?.()
    await manager.close()
  })

  it('close stops the timer and is safe to call twice', async () => {
    const { clock, calls, manager } = setup()
    manager.add({ id: 'a', token: 't' }, 0)
    manager.start()
    await manager.close()
    await manager.close()
    await clock.advance(1000)
    expect(calls).toHaveLength(0)
    expect(clock.pending).toBe(0)
  })
})

describe('LockManager under failing renewals', () => {
  it('reports a lease lost at its deadline, not a heartbeat later', async () => {
    const { clock, lost, manager } = setup(async () => {
      throw new Error('connection refused')
    })
    manager.add({ id: 'a', token: 't' }, 0) // deadline 300, heartbeat 100
    manager.add({ id: 'b', token: 't' }, 50) // deadline 350
    manager.start()

    await clock.advance(299)
    expect(lost).toEqual([])
    await clock.advance(1)
    expect(lost.map(([id]) => id)).toEqual(['a'])
    await clock.advance(50)
    expect(lost.map(([id]) => id)).toEqual(['a', 'b'])
    await manager.close()
  })

  it('a renewal that never answers does not hold back the expiry', async () => {
    const { clock, lost, manager } = setup(() => new Promise(() => undefined))
    manager.add({ id: 'a', token: 't' }, 0)
    manager.start()
    await clock.advance(300)
    expect(lost.map(([id]) => id)).toEqual(['a'])
    await manager.close()
  })
})

describe('LockManager in a process paused while a renewal was in flight', () => {
  function pausedMidRenewal() {
    let answer: ((codes: number[]) => void) | undefined
    let first = true
    // The first renewal is answered when the test says so; later ones at once.
    const ctx = setup((batch) => {
      if (!first) return Promise.resolve(batch.map(() => 'renewed' as const))
      first = false
      return new Promise((resolve) => (answer = () => resolve(batch.map(() => 'renewed' as const))))
    })
    ctx.manager.add({ id: 'a', token: 't' }, 0) // deadline 300, heartbeat 100
    ctx.manager.start()
    return { ...ctx, answer: () => answer?.([1]) }
  }

  it('keeps the lease when the reply is read first on resume', async () => {
    const { clock, lost, calls, manager, answer } = pausedMidRenewal()
    await clock.advance(100) // renewal sent
    clock.jump(1_000) // paused past the lease
    answer() // the reply was waiting in the socket
    await clock.advance(0)
    await clock.advance(100) // the next tick asks again
    expect(lost).toEqual([])
    expect(calls).toHaveLength(2)
    await manager.close()
  })

  it('keeps the lease when the overdue timer fires before the reply is read', async () => {
    const { clock, lost, manager, answer } = pausedMidRenewal()
    await clock.advance(100)
    clock.jump(1_000)
    await clock.advance(0) // the late timer fires first: it waits one more interval
    answer()
    await clock.advance(0)
    expect(lost).toEqual([])
    await manager.close()
  })
})
