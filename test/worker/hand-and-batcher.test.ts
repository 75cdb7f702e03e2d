/**
 * The worker's two helpers for short jobs, without Redis: Batcher sends the finishes of one tick together,
 * in calls of at most batchMax (and one with nothing when poked); Hand holds read jobs until a slot is
 * free, keeps those started for the next call to take, and gives back those held HAND_IDLE_MS (a
 * ManualClock: no real waiting).
 */
import { describe, expect, it } from 'vitest'
import { Batcher } from '../../lib/worker/batcher.js'
import { HAND_IDLE_MS, Hand } from '../../lib/worker/hand.js'
import { ManualClock } from '../helpers/manual-clock.js'

describe('Batcher', () => {
  it('what is added in one tick goes out in calls of at most batchMax, each answered in order', async () => {
    const calls: number[][] = []
    const b = new Batcher<number, string>(2, async (items) => {
      calls.push(items)
      return items.map((n) => `r${n}`)
    })
    const answers = await Promise.all([1, 2, 3, 4, 5].map((n) => b.add(n)))
    expect(calls).toEqual([[1, 2], [3, 4], [5]])
    expect(answers).toEqual(['r1', 'r2', 'r3', 'r4', 'r5'])
    // The next tick's items make a new call.
    expect(await b.add(6)).toBe('r6')
    expect(calls).toHaveLength(4)
  })

  it('with maxInFlight, what is added while that many calls are out waits and goes out together when one returns', async () => {
    const calls: number[][] = []
    const replies: (() => void)[] = []
    const b = new Batcher<number, number>(
      3,
      (items) => {
        calls.push(items)
        return new Promise((resolve) => replies.push(() => resolve(items)))
      },
      2,
    )
    const first = [b.add(1), b.add(2)]
    await new Promise((resolve) => process.nextTick(resolve))
    const second = b.add(3)
    await new Promise((resolve) => process.nextTick(resolve))
    const waiting = [b.add(4), b.add(5)]
    await new Promise((resolve) => process.nextTick(resolve))
    b.add(6)
    await new Promise((resolve) => process.nextTick(resolve))
    // Two calls out: 4, 5 and 6 wait for one of them.
    expect(calls).toEqual([[1, 2], [3]])
    replies[0]?.()
    expect(await Promise.all(first)).toEqual([1, 2])
    await new Promise((resolve) => process.nextTick(resolve))
    expect(calls).toEqual([[1, 2], [3], [4, 5, 6]])
    replies[1]?.()
    replies[2]?.()
    expect(await second).toBe(3)
    expect(await Promise.all(waiting)).toEqual([4, 5])
  })

  it('poke() sends one call this tick even with nothing added, and joins the items added in the same tick', async () => {
    const calls: number[][] = []
    const b = new Batcher<number, number>(2, async (items) => {
      calls.push(items)
      return items
    })
    b.poke()
    b.poke()
    await new Promise((resolve) => process.nextTick(resolve))
    expect(calls).toEqual([[]])
    b.poke()
    await b.add(7)
    expect(calls).toEqual([[], [7]])
  })

  it('a call that fails rejects every item of it, and only those', async () => {
    const b = new Batcher<number, number>(2, async (items) => {
      if (items.includes(3)) throw new Error('down')
      return items
    })
    const settled = await Promise.allSettled([1, 2, 3, 4].map((n) => b.add(n)))
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected'])
  })
})

describe('Hand', () => {
  const setup = () => {
    const clock = new ManualClock()
    const givenBack: string[] = []
    const hand = new Hand<string>({ clock, maxAgeMs: 1_000, idOf: (id) => id, giveBack: (ids) => givenBack.push(...ids) })
    return { clock, hand, givenBack }
  }

  it('starts what it holds, oldest first, and hands the started ones to the next call once', () => {
    const { clock, hand } = setup()
    hand.hold('a', clock.now())
    hand.hold('b', clock.now())
    hand.hold('c', clock.now())
    expect(hand.has('b')).toBe(true)
    expect([hand.start(), hand.start()]).toEqual(['a', 'b'])
    expect(hand.has('b')).toBe(false)
    expect(hand.size).toBe(1)
    expect(hand.starts()).toEqual(['a', 'b'])
    expect(hand.starts()).toEqual([])
    expect([hand.start(), hand.start()]).toEqual(['c', undefined])
    expect(hand.starts()).toEqual(['c'])
  })

  it('a job held HAND_IDLE_MS without a slot going free goes back; one taken before then does not', async () => {
    const { clock, hand, givenBack } = setup()
    hand.hold('a', clock.now())
    await clock.advance(HAND_IDLE_MS / 2)
    hand.hold('b', clock.now())
    await clock.advance(HAND_IDLE_MS / 2 - 1)
    expect(givenBack).toEqual([])
    await clock.advance(1)
    expect(givenBack).toEqual(['a'])
    expect(hand.size).toBe(1)
    expect(hand.start()).toBe('b')
    await clock.advance(HAND_IDLE_MS)
    expect(givenBack).toEqual(['a'])
  })

  it('never starts a job whose reservation is half spent (a worker resumed from a long pause): it goes back', async () => {
    const { clock, hand, givenBack } = setup()
    const reservedAt = clock.now()
    await clock.advance(990)
    hand.hold('old', reservedAt)
    hand.hold('young', clock.now())
    // Due by its reservation before its time in hand: the timer gives it back at 1,000 ms.
    await clock.advance(10)
    expect(givenBack).toEqual(['old'])
    // A clock that jumped past both limits (the timer has not run yet): start() gives back rather than start.
    hand.hold('late', clock.now() - 1_000)
    hand.hold('fresh', clock.now())
    expect(hand.start()).toBe('young')
    expect(hand.start()).toBe('fresh')
    expect(givenBack).toEqual(['old', 'late'])
  })

  it('gives back everything it holds at close, and keeps no timer', async () => {
    const { clock, hand, givenBack } = setup()
    hand.hold('a', clock.now())
    hand.hold('b', clock.now())
    hand.giveBackAll()
    expect(givenBack).toEqual(['a', 'b'])
    await clock.advance(HAND_IDLE_MS * 2)
    expect(givenBack).toEqual(['a', 'b'])
  })
})
