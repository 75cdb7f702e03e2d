/** TakeAhead with an injected clock and no Redis: reservations, peeks, claims, the idle return and close. */
import { describe, expect, it } from 'vitest'
import { HOT_RUN_MS, RESERVATION_IDLE_MS, type Settled, TakeAhead } from '../lib/worker/take-ahead.js'
import { ManualClock } from './helpers/manual-clock.js'

function setup({ concurrency = 2, wait = ['w1', 'w2', 'w3'], running = new Set<string>() } = {}) {
  const clock = new ManualClock()
  const reads: number[] = []
  const givenBack: string[][] = []
  const errors: unknown[] = []
  const ahead = new TakeAhead({
    concurrency,
    taker: { workerToken: 'wt', leaseMs: 1_000, workerName: 'w' },
    reserveMs: 1_000,
    running: (id) => running.has(id),
    read: async (n) => {
      reads.push(n)
      return wait.slice(0, n)
    },
    giveBack: async (ids) => void givenBack.push(ids),
    clock,
    onError: (err) => errors.push(err),
  })
  return { clock, ahead, reads, givenBack, errors, running }
}

/** What a finish reply says: nothing taken of its candidates but `left`, and the ids it reserved or peeked at. */
const reply = (over: Partial<Settled> = {}): Settled => ({ left: [], taken: 1, ...over })

describe('TakeAhead', () => {
  it('reads candidates from wait when nothing is reserved or peeked', async () => {
    const { ahead, reads } = setup()
    const look = await ahead.forTake(2)
    expect(look).toMatchObject({ ids: ['w1', 'w2'], reserved: false })
    expect(reads).toEqual([2])
  })

  it('with short jobs a finish reserves up to two ids a run, at most concurrency + 3 ahead (the job in hand, the next call), and the next call takes them first', async () => {
    const { ahead } = setup({ concurrency: 2 })
    ahead.ran(HOT_RUN_MS / 2)
    const first = ahead.forFinish()
    expect(first).toMatchObject({ ids: [], reserve: 2, peek: 0 })
    const second = ahead.forFinish()
    expect(second.reserve).toBe(2)
    // Four asked for and not back yet: one more fits under concurrency + 3.
    const third = ahead.forFinish()
    expect(third.reserve).toBe(1)
    ahead.settle(first, reply({ reservedNext: ['r1', 'r2'] }))
    ahead.settle(second, reply({ reservedNext: ['r3', 'r4'] }))
    ahead.settle(third, reply({ reservedNext: ['r5'] }))

    expect(ahead.reservedCount).toBe(5)
    expect(await ahead.forTake(2)).toMatchObject({ ids: ['r1', 'r2'], reserved: true })
    // A finish of two runs, with one more for the hand: three candidates.
    expect(ahead.forFinish(true, 2, 1)).toMatchObject({ ids: ['r3', 'r4', 'r5'], reserved: true })
  })

  it('reserved candidates a call left (its reply was full, or it failed) are next again, in order', async () => {
    const { ahead } = setup()
    ahead.ran(1)
    const plan = ahead.forFinish()
    ahead.settle(plan, reply({ reservedNext: ['r1', 'r2', 'r3'] }))
    const look = await ahead.forTake(3)

    ahead.settle(look, reply({ left: ['r2', 'r3'], taken: 1 }))
    expect(await ahead.forTake(1)).toMatchObject({ ids: ['r2'], reserved: true })
    ahead.settle({ ids: ['r2'], reserved: true, reserve: 0, peek: 0, finish: false }, undefined)
    expect(await ahead.forTake(3)).toMatchObject({ ids: ['r2', 'r3'], reserved: true })
  })

  it('reserved ids no finish used for RESERVATION_IDLE_MS go back to wait, not before', async () => {
    const { ahead, clock, givenBack } = setup()
    ahead.ran(1)
    ahead.settle(ahead.forFinish(), reply({ reservedNext: ['r1', 'r2'] }))

    await clock.advance(RESERVATION_IDLE_MS - 1)
    expect(givenBack).toEqual([])
    await clock.advance(1)
    expect(givenBack).toEqual([['r1', 'r2']])
    expect(ahead.reservedCount).toBe(0)
  })

  it('a finish that keeps using them pushes the return back', async () => {
    const { ahead, clock, givenBack } = setup({ concurrency: 4 })
    ahead.ran(1)
    ahead.settle(ahead.forFinish(), reply({ reservedNext: ['r1', 'r2'] }))
    await clock.advance(RESERVATION_IDLE_MS - 10)
    const look = ahead.forFinish()
    ahead.settle(look, reply({ reservedNext: ['r3'] }))

    await clock.advance(20)
    expect(givenBack).toEqual([])
    await clock.advance(RESERVATION_IDLE_MS)
    expect(givenBack).toHaveLength(1)
  })

  it('with long jobs a finish peeks about once every concurrency calls, and a peeked id goes to one call at a time', async () => {
    const running = new Set<string>(['p2'])
    const { ahead } = setup({ concurrency: 2, running })
    ahead.ran(HOT_RUN_MS * 10)
    const first = ahead.forFinish()
    expect(first.peek).toBeGreaterThan(0)
    // A peek is pending: the next finish asks for none.
    expect(ahead.forFinish().peek).toBe(0)
    ahead.settle(first, reply({ peeked: ['p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7', 'p8'] }))

    const a = ahead.forFinish()
    const b = ahead.forFinish()
    // p2 runs here already: skipped; p1 is claimed by the first call, so the second gets p3.
    expect(a.ids).toEqual(['p1'])
    expect(b.ids).toEqual(['p3'])
    expect(a.peek + b.peek).toBe(0)
  })

  it('close() hands every reserved id back, and a call settled after close hands back what it reserved', async () => {
    const { ahead, givenBack } = setup()
    ahead.ran(1)
    const inFlight = ahead.forFinish()
    ahead.settle(ahead.forFinish(), reply({ reservedNext: ['r1'] }))

    await ahead.close()
    expect(givenBack).toEqual([['r1']])
    expect(ahead.forFinish()).toMatchObject({ ids: [], reserve: 0, peek: 0 })
    ahead.settle(inFlight, reply({ reservedNext: ['r2', 'r3'] }))
    expect(givenBack).toEqual([['r1'], ['r2', 'r3']])
  })

  it('a failed return is reported, never thrown', async () => {
    const { ahead, errors } = setup()
    const broken = new TakeAhead({
      concurrency: 1,
      taker: { workerToken: 'wt', leaseMs: 1_000, workerName: 'w' },
      reserveMs: 1_000,
      running: () => false,
      read: async () => [],
      giveBack: async () => {
        throw new Error('down')
      },
      clock: new ManualClock(),
      onError: (err) => errors.push(err),
    })
    broken.ran(1)
    broken.settle(broken.forFinish(), reply({ reservedNext: ['r1'] }))
    await broken.close()
    expect(errors).toHaveLength(1)
    await ahead.close()
  })
})
