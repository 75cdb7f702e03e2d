/**
 * The worker's two helpers for short jobs, without Redis: Batcher sends the finishes of one tick together,
 * in calls of at most batchMax; Hand holds taken jobs until a slot is free, and gives back one held
 * HAND_IDLE_MS (a ManualClock: no real waiting).
 */
import { describe, expect, it } from 'vitest'
import { Batcher } from '../lib/worker/batcher.js'
import { HAND_IDLE_MS, Hand } from '../lib/worker/hand.js'
import { ManualClock } from './helpers/manual-clock.js'

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
    const hand = new Hand<string>({ clock, idOf: (id) => id, giveBack: (id) => givenBack.push(id) })
    return { clock, hand, givenBack }
  }

  it('gives out what it holds, oldest first; forgets a job whose lease was lost', () => {
    const { hand } = setup()
    hand.hold('a')
    hand.hold('b')
    hand.hold('c')
    expect(hand.has('b')).toBe(true)
    expect(hand.drop('b')).toBe(true)
    expect(hand.drop('b')).toBe(false)
    expect([hand.next(), hand.next(), hand.next()]).toEqual(['a', 'c', undefined])
  })

  it('a job held HAND_IDLE_MS without a slot going free goes back; one taken before then does not', async () => {
    const { clock, hand, givenBack } = setup()
    hand.hold('a')
    await clock.advance(HAND_IDLE_MS / 2)
    hand.hold('b')
    await clock.advance(HAND_IDLE_MS / 2 - 1)
    expect(givenBack).toEqual([])
    await clock.advance(1)
    expect(givenBack).toEqual(['a'])
    expect(hand.size).toBe(1)
    expect(hand.next()).toBe('b')
    await clock.advance(HAND_IDLE_MS)
    expect(givenBack).toEqual(['a'])
  })

  it('gives back everything it holds at close, and keeps no timer', async () => {
    const { clock, hand, givenBack } = setup()
    hand.hold('a')
    hand.hold('b')
    hand.giveBackAll()
    expect(givenBack).toEqual(['a', 'b'])
    await clock.advance(HAND_IDLE_MS * 2)
    expect(givenBack).toEqual(['a', 'b'])
  })
})
