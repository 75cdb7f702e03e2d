/**
 * The claim on a queue's count of failed jobs, branch by branch (lua/claim-1.lua, lua/settle-1.lua, and
 * the probe's reading of it in lua/probe-13.lua), against real Redis; the reaper's use of it, with
 * overlapping and killed invocations: reaper-jobs-failed.test.ts.
 */
import { describe, expect, it } from 'vitest'
import { claimFailures, probe, settleFailures } from '../../lib/redis/commands.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { failedCount } from '../helpers/failed-count.js'
import { useRedis } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const redis = useRedis()
const keys = queueKeys('emq', 'q')
const setCount = (n: number) => redis.client.hset(keys.meta, 'failedNew', n)
/** What the probe reads as jobs to claim. */
const toClaim = async () => (await probe(redis.client, keys, { limit: 10, audit: 0, auditAt: 0, readFailures: true })).failedNew

describe('claim-1.lua and settle-1.lua', () => {
  it('one claim at a time: a live claim of another invocation leaves the count where it is', async () => {
    await setCount(3)
    const a = await claimFailures(redis.client, keys, 'a', 60_000)
    await setCount(2)
    const b = await claimFailures(redis.client, keys, 'b', 60_000)

    expect(a).toEqual({ claimed: 3, takenOver: 0 })
    expect(b).toEqual({ claimed: 0, takenOver: 0 })
    expect(await failedCount(redis.client, 'q')).toMatchObject({ failedNew: '2', failedClaim: 'a', failedClaimed: '3' })
    expect(await toClaim()).toBe(2)
  })

  it('a claim call resent after a lost reply claims the same jobs, not twice as many', async () => {
    await setCount(3)
    const first = await claimFailures(redis.client, keys, 'a', 60_000)
    const again = await claimFailures(redis.client, keys, 'a', 60_000)
    expect([first.claimed, again.claimed]).toEqual([3, 3])
    expect(await settleFailures(redis.client, keys, 'a', true)).toBe(3)
    expect(await failedCount(redis.client, 'q')).toEqual({})
  })

  it('not published: the jobs go back to the count; published: the claim ends; only its own invocation settles it', async () => {
    await setCount(3)
    await claimFailures(redis.client, keys, 'a', 60_000)
    await redis.client.hincrby(keys.meta, 'failedNew', 1)
    const foreign = await settleFailures(redis.client, keys, 'b', true)
    const givenBack = await settleFailures(redis.client, keys, 'a', false)
    const afterGiveBack = await failedCount(redis.client, 'q')
    await claimFailures(redis.client, keys, 'b', 60_000)
    const settled = await settleFailures(redis.client, keys, 'b', true)

    expect(foreign).toBeUndefined()
    expect(givenBack).toBe(3)
    expect(afterGiveBack).toEqual({ failedNew: '4' })
    expect(settled).toBe(4)
    expect(await settleFailures(redis.client, keys, 'b', true)).toBeUndefined()
    expect(await failedCount(redis.client, 'q')).toEqual({})
  })

  it('an expired claim is counted by the probe and taken over whole, with the jobs failed since', async () => {
    await setCount(3)
    await claimFailures(redis.client, keys, 'dead', 50)
    await setCount(1)
    const taken = await waitFor(
      async () => {
        const claim = await claimFailures(redis.client, keys, 'next', 60_000)
        return claim.claimed > 0 && claim
      },
      { what: 'the claim to expire' },
    )

    expect(taken).toEqual({ claimed: 4, takenOver: 3 })
    expect(await settleFailures(redis.client, keys, 'dead', true)).toBeUndefined()
    expect(await failedCount(redis.client, 'q')).toMatchObject({ failedClaim: 'next', failedClaimed: '4' })
  })

  it('the probe reads an expired claim as jobs to claim, a live one as none', async () => {
    await setCount(2)
    await claimFailures(redis.client, keys, 'live', 60_000)
    const whileLive = await toClaim()
    await redis.client.hset(keys.meta, 'failedClaimUntil', '1')
    expect([whileLive, await toClaim()]).toEqual([0, 2])
  })

  it('a count below zero (a reaper before claims acknowledged twice) is left for later failures to fill', async () => {
    await setCount(-2)
    const claim = await claimFailures(redis.client, keys, 'a', 60_000)
    expect(claim).toEqual({ claimed: 0, takenOver: 0 })
    expect(await toClaim()).toBe(0)
    expect(await failedCount(redis.client, 'q')).toEqual({ failedNew: '-2' })
  })
})
