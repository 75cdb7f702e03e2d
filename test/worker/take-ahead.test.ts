/** TakeAhead with an injected clock and no Redis: reservations, the hand's reads, the bound, peeks, claims, the idle return and close. */
import { describe, expect, it } from 'vitest'
import { AHEAD_ROOM, HOT_RUN_MS, RESERVATION_IDLE_MS, type Settled, TakeAhead } from '../../lib/worker/take-ahead.js'
import { ManualClock } from '../helpers/manual-clock.js'

function setup({
  concurrency = 2,
  wait = ['w1', 'w2', 'w3'],
  running = new Set<string>(),
  hand = { held: 0 },
  budget = { left: Number.POSITIVE_INFINITY },
} = {}) {
  const clock = new ManualClock()
  const reads: number[] = []
  const givenBack: string[][] = []
  const errors: unknown[] = []
  const ahead = new TakeAhead({
    concurrency,
    taker: { workerToken: 'wt', leaseMs: 1_000, workerName: 'w' },
    reserveMs: 1_000,
    running: (id) => running.has(id),
    read: async (n, more = 0) => {
      reads.push(n + more)
      return wait.slice(0, n + more)
    },
    giveBack: async (ids) => void givenBack.push(ids),
    held: () => hand.held,
    budget: () => budget.left,
    clock,
    onError: (err) => errors.push(err),
  })
  return { clock, ahead, reads, givenBack, errors, running, hand, budget }
}

/** What a finish reply says: nothing taken of its candidates but `left`, and the ids it reserved or peeked at. */
const reply = (over: Partial<Settled> = {}): Settled => ({ left: [], taken: 1, ...over })

describe('TakeAhead', () => {
  it('reads candidates from wait when nothing is reserved or peeked, and the ids after them for the first finish', async () => {
    const { ahead, reads } = setup()
    const look = await ahead.forTake(2)
    expect(look).toMatchObject({ ids: ['w1', 'w2'], reserved: false })
    // A concurrency's worth more: the first finish takes them as a peek's, in its own call.
    expect(reads).toEqual([4])
    ahead.settle(look, reply({ taken: 2 }))
    expect(ahead.forFinish(true, 2, 2)).toMatchObject({ ids: ['w3'], reserved: false })
  })

  it('a budget (MAX_STARTS) bounds what is read, reserved and taken from a peek, those set aside counted in it', async () => {
    const { ahead, reads, budget } = setup({ concurrency: 4 })
    budget.left = 3
    expect((await ahead.forTake(4)).ids).toEqual(['w1', 'w2', 'w3'])
    expect(reads).toEqual([3])
    ahead.ran(HOT_RUN_MS / 2)
    // Two in flight are taken already (not set aside): one job more may be reserved.
    budget.left = 3 - 2
    const look = ahead.forFinish(true, 2, 0)
    expect(look.reserve).toBe(1)
    ahead.settle(look, reply({ reservedNext: ['r1'] }))
    // The reserved one is within the budget: it is taken, and nothing more is reserved beside it.
    expect(ahead.forFinish(true, 1, 1)).toMatchObject({ ids: ['r1'], reserve: 0 })
    budget.left = 0
    expect(await ahead.forTake(2)).toMatchObject({ ids: [] })
    expect(reads).toEqual([3])
  })

  it('with short jobs a finish reserves up to two ids a run, never past concurrency + AHEAD_ROOM set aside, and the next call takes them first', async () => {
    const { ahead } = setup({ concurrency: 2 })
    ahead.ran(HOT_RUN_MS / 2)
    const first = ahead.forFinish()
    expect(first).toMatchObject({ ids: [], reserve: 2, peek: 0 })
    // Two asked for and not back yet: what is left of the bound.
    const second = ahead.forFinish()
    expect(second.reserve).toBe(2 + AHEAD_ROOM - 2)
    expect(ahead.forFinish().reserve).toBe(0)
    ahead.settle(first, reply({ reservedNext: ['r1', 'r2'] }))
    ahead.settle(second, reply({ reservedNext: ['r3'] }))

    expect(ahead.reservedCount).toBe(3)
    expect(ahead.setAside()).toBe(3)
    expect(await ahead.forTake(2)).toMatchObject({ ids: ['r1', 'r2'], reserved: true })
    // A finish of one run with one slot free takes r3 and, the pool empty, reads nothing into the hand.
    expect(ahead.forFinish(true, 1, 1, 1)).toMatchObject({ ids: ['r3'], reserved: true, hand: [] })
  })

  it('a finish reads the next reserved id into the hand; the hand counts in the bound, and an id not read is next again', async () => {
    const { ahead, hand } = setup({ concurrency: 1 })
    ahead.ran(1)
    ahead.settle(ahead.forFinish(), reply({ reservedNext: ['r1', 'r2'] }))
    // No slot free (a job from the hand took it): nothing to take, r1 read into the hand.
    const look = ahead.forFinish(true, 1, 0, 1)
    expect(look).toMatchObject({ ids: [], hand: ['r1'] })
    // While the read is in flight, a second call reads nothing more.
    expect(ahead.forFinish(true, 1, 0, 1).hand).toEqual([])
    expect([...ahead.settle(look, reply({ taken: 0, handed: ['r1'] })).keys()]).toEqual(['r1'])
    hand.held = 1
    expect(ahead.setAside()).toBeLessThanOrEqual(1 + AHEAD_ROOM)
    expect(ahead.forFinish(true, 1, 0, 1)).toMatchObject({ hand: [], reserve: 0 })

    // The hand's job started; a read the queue's pause refused leaves the id reserved, next again.
    hand.held = 0
    const paused = ahead.forFinish(true, 1, 0, 1)
    expect(paused.hand).toEqual(['r2'])
    expect(ahead.settle(paused, reply({ taken: 0, handed: [] })).size).toBe(0)
    expect(await ahead.forTake(2)).toMatchObject({ ids: ['r2'], reserved: true })
  })

  it('only a fresh reservation is read into the hand: one reserved a quarter of its length ago is left to be taken', async () => {
    const { ahead, clock } = setup({ concurrency: 1 })
    ahead.ran(1)
    ahead.settle(ahead.forFinish(), reply({ reservedNext: ['r1', 'r2'] }))
    // reserveMs is 1,000; finishes that take nothing keep the pool from the idle return meanwhile.
    for (let ms = 0; ms < 250; ms += 50) {
      await clock.advance(50)
      ahead.settle(ahead.forFinish(true, 0, 0, 0), reply({ taken: 0 }))
    }
    expect(ahead.forFinish(true, 1, 0, 1).hand).toEqual([])
    expect(ahead.forFinish(true, 1, 1, 1).ids).toEqual(['r1'])
  })

  it('holds a job in hand while jobs are short; at concurrency 1 with jobs shorter than a round trip, only a call that takes reads', async () => {
    const one = setup({ concurrency: 1 })
    const two = setup({ concurrency: 2 })
    // Nothing run yet: no job is short, and none is held.
    expect([one.ahead.handSize(), two.ahead.handSize()]).toEqual([0, 0])
    for (const { ahead, clock } of [one, two]) {
      ahead.ran(1)
      // A call that took 5 ms to come back (and reserved four ids): jobs of 1 ms end before a read would.
      const look = ahead.forFinish()
      await clock.advance(5)
      ahead.settle(look, reply({ reservedNext: ['r1', 'r2', 'r3', 'r4'] }))
    }
    expect([one.ahead.handSize(), two.ahead.handSize()]).toEqual([1, 1])
    // Concurrency 1: a finish that confirms a start from the hand (no slot free) reads nothing...
    expect(one.ahead.forFinish(true, 1, 0, 1)).toMatchObject({ ids: [], hand: [] })
    // ...one that takes the next job reads the one after into the hand.
    const taking = one.ahead.forFinish(true, 1, 1, 1)
    expect(taking).toMatchObject({ ids: ['r1'], reserved: true, hand: ['r2'] })
    expect([...one.ahead.settle(taking, reply({ taken: 1, handed: ['r2'] })).keys()]).toEqual(['r2'])
    // Concurrency 2 reads whenever the hand is empty.
    expect(two.ahead.forFinish(true, 1, 0, 1)).toMatchObject({ ids: [], hand: ['r1'] })
    // Jobs that run longer than the round trip (still under HOT_RUN_MS): every call reads at concurrency 1 too.
    for (let i = 0; i < 40; i++) one.ahead.ran(HOT_RUN_MS - 2)
    expect(one.ahead.forFinish(true, 1, 0, 1).hand).toEqual(['r3'])
    // Long jobs: no hand at any concurrency.
    for (let i = 0; i < 40; i++) one.ahead.ran(10 * HOT_RUN_MS)
    expect(one.ahead.handSize()).toBe(0)
  })

  it('a call with a free slot takes over the id being read into the hand (it is next in line): the read goes unheld', async () => {
    const { ahead } = setup({ concurrency: 1 })
    ahead.ran(1)
    ahead.settle(ahead.forFinish(), reply({ reservedNext: ['r1', 'r2'] }))
    const reading = ahead.forFinish(true, 1, 0, 1)
    expect(reading.hand).toEqual(['r1'])

    const taking = ahead.forFinish(true, 1, 1, 1)
    expect(taking).toMatchObject({ ids: ['r1'], reserved: true, hand: ['r2'] })
    expect(ahead.settle(reading, reply({ taken: 0, handed: ['r1'] })).size).toBe(0)
    expect([...ahead.settle(taking, reply({ taken: 1, handed: ['r2'] })).keys()]).toEqual(['r2'])
    expect(ahead.reservedCount).toBe(0)
    expect(ahead.setAside()).toBe(0)
  })

  it('a take whose candidates others got first forgets the hint, and what it reserved in their place is next', async () => {
    const { ahead } = setup({ concurrency: 2 })
    ahead.ran(HOT_RUN_MS * 10)
    const peek = ahead.forFinish()
    ahead.settle(peek, reply({ peeked: ['p1', 'p2', 'p3', 'p4', 'p5', 'p6'] }))
    const look = await ahead.forTake(1)
    expect(look.ids).toEqual(['p1'])

    ahead.settle(look, reply({ taken: 0, reservedNext: ['r9'] }))
    expect(await ahead.forTake(2)).toMatchObject({ ids: ['r9'], reserved: true })
    // The hint (p2...) went with the miss: the next take reads the line.
    expect(await ahead.forTake(2)).toMatchObject({ ids: ['w1', 'w2'], reserved: false })
  })

  it('reserved candidates a call left (its reply was full, or it failed) are next again, in order', async () => {
    const { ahead } = setup()
    ahead.ran(1)
    const plan = ahead.forFinish()
    ahead.settle(plan, reply({ reservedNext: ['r1', 'r2', 'r3'] }))
    const look = await ahead.forTake(3)

    ahead.settle(look, reply({ left: ['r2', 'r3'], taken: 1 }))
    expect(await ahead.forTake(1)).toMatchObject({ ids: ['r2'], reserved: true })
    ahead.settle({ at: 0, ids: ['r2'], reserved: true, reserve: 0, peek: 0, hand: [], finish: false }, undefined)
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
      held: () => 0,
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
