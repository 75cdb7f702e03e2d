/**
 * One finish call for the runs that ended in the same tick (worker/batcher.ts), or for none (a job
 * started from the hand with no run ending): it takes the jobs started from the hand since the last
 * call, fills the free slots (from the reserved or peeked ids), reads the next job into the hand, and
 * prepares the calls after it, unless the worker is closing, paused or held back by its limiter.
 */
import { deliverHandoffs } from '../flows/handoffs.js'
import { type FinishManyResult, type FinishRun, finishRuns as finishRunsCall } from '../redis/commands.js'
import type { FinishOutcome, RunContext, Started } from './context.js'
import { unreserveHeld } from './finishing.js'
import { startOrGiveBack, startReady } from './running.js'
import type { Lookahead } from './take-ahead.js'

export async function finishRuns(core: RunContext, runs: FinishRun[]): Promise<FinishOutcome[]> {
  const { clock, concurrency } = core.settings
  const starts = core.hand.starts()
  const take = core.phase === 'running' && core.heldUntil <= clock.now() && !core.pausedLocally
  const free = Math.max(0, Math.min(runs.length, concurrency - core.processing - core.incoming))
  const look: Lookahead = core.takeAhead.forFinish(take, runs.length, free, inHand(core))
  const sentAt = clock.now()
  const next = {
    ...core.takeAhead.takeNext(look),
    starts: starts.map((s) => ({ id: s.job.id, token: s.token, scored: s.scored === true })),
  }
  let reply: FinishManyResult
  core.incoming += look.ids.length
  try {
    reply = await core.calls.track(finishRunsCall(core.conn.client, core.keys, runs, next))
  } catch (err) {
    core.takeAhead.settle(look, undefined)
    for (const s of starts) core.lockLost(s.job.id, 'the call that takes it from the hand failed')
    throw err
  } finally {
    core.incoming -= look.ids.length
  }
  core.promoter.learn(reply)
  core.hold(reply.waitMs)
  confirmed(core, starts, reply, sentAt)
  for (const t of reply.taken) startOrGiveBack(core, { ...t, sentAt })
  const handed = reply.handed.map((t) => t.job.id)
  const hold = core.takeAhead.settle(look, {
    left: reply.left,
    taken: reply.taken.length,
    reservedNext: reply.reserved,
    peeked: reply.peeked,
    handed,
  })
  holdAll(
    core,
    reply.handed.flatMap((t) => {
      const reservedAt = hold.get(t.job.id)
      return reservedAt === undefined ? [] : [{ ...t, sentAt, reservedAt }]
    }),
  )
  startReady(core)
  const delivered = handOff(
    core,
    reply.runs.flatMap((r, i) => (r.handoff === undefined ? [] : [[(runs[i] as FinishRun).run.id, r.handoff] as [string, string]])),
  )
  return reply.runs.map((r) => ({ ...r, finishedOn: reply.finishedOn, ...(r.handoff === undefined || !delivered ? {} : { delivered }) }))
}

/**
 * Tells the parents of the flow children this call ended (lib/flows/handoffs.ts), at once: the runs' events
 * wait for the returned promise, so a parent knows its child's outcome by the child's event (as in BullMQ).
 * It resolves once the parents were told, or the delivery failed (the entries stay for the queue's next
 * sweep); the outbox is cleaned after.
 */
function handOff(core: RunContext, entries: [string, string][]): Promise<void> | undefined {
  if (entries.length === 0) return undefined
  let settled: () => void = () => undefined
  const delivered = new Promise<void>((resolve) => {
    settled = resolve
  })
  const delivery = deliverHandoffs(core.conn.client, core.keys, entries, settled)
    .catch((err: unknown) => {
      core.report(core.failure('tell the parents of flow jobs of queue', err))
    })
    .finally(settled)
  void core.calls.track(delivery)
  return delivered
}

/** What a call said of the jobs started from the hand: taken (their leases renewed from now on), or lost. */
function confirmed(core: RunContext, starts: Started[], reply: FinishManyResult, sentAt: number): void {
  for (const [i, s] of starts.entries()) {
    const run = core.runs.get(s.job.id)
    if (run?.token !== s.token) continue
    if (reply.confirmed[i] !== 'taken') {
      core.lockLost(s.job.id, 'its reservation was gone when it started (it expired, or the job was removed)', run)
      continue
    }
    run.job.startedOn = reply.finishedOn
    if (run.phase === 'running' || run.phase === 'finishing') core.locks.add({ id: s.job.id, token: s.token }, sentAt)
  }
}

/** How many jobs a worker holds in hand beyond its concurrency (TakeAhead.handSize), none with a limiter (it counts starts). */
function inHand(core: RunContext): number {
  return core.settings.limiter ? 0 : core.takeAhead.handSize()
}

/** Jobs a finish read into the hand (a reply after close() or pause() began hands them back). */
function holdAll(core: RunContext, handed: Started[]): void {
  if (handed.length === 0) return
  if (core.phase !== 'running' || core.pausedLocally)
    void unreserveHeld(
      core,
      handed.map((s) => s.job.id),
    )
  else for (const s of handed) core.hand.hold(s, s.reservedAt ?? s.sentAt)
}
