/**
 * A job's side of a flow, BullMQ 6.7's methods: getChildrenValues, getIgnoredChildrenFailures (and its old
 * name getFailedChildrenValues), getDependencies, getDependenciesCount, and moveToWaitingChildren (fenced by
 * the run's token, with WaitingChildrenError). Plain reads of the parent's keys in its own queue; input is
 * validated first, and a refused move changes nothing and says why.
 */
import { EchoMQError, UnrecoverableError } from '../errors.js'
import type { Job } from '../job.js'
import * as commands from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { parseJobKey, type QueueKeys } from '../redis/keys.js'
import { checkInteger, checkKnown, describe, fail, opt } from '../validate.js'
import { removeChildDependency, removeUnprocessedChildren } from './dependency.js'

type Kind = commands.DependencyKind
const KINDS: readonly Kind[] = ['processed', 'unprocessed', 'ignored', 'failed']

/** getDependencies' options: a page of each kind asked for ({ cursor, count }, BullMQ's). */
export type DependenciesOptions = Partial<Record<Kind, { cursor?: number; count?: number }>>

export interface Dependencies {
  processed?: Record<string, unknown>
  unprocessed?: string[]
  ignored?: Record<string, string>
  failed?: string[]
  nextProcessedCursor?: number
  nextUnprocessedCursor?: number
  nextIgnoredCursor?: number
  nextFailedCursor?: number
}

export interface JobFlows {
  getChildrenValues(job: Job): Promise<Record<string, unknown>>
  getIgnoredChildrenFailures(job: Job): Promise<Record<string, string>>
  getDependencies(job: Job, options: unknown): Promise<Dependencies>
  getDependenciesCount(job: Job, options: unknown): Promise<Partial<Record<Kind, number>>>
  moveToWaitingChildren(job: Job, token: string, options: unknown): Promise<boolean>
  removeChildDependency(job: Job): Promise<boolean>
  removeUnprocessedChildren(job: Job): Promise<void>
}

export interface JobFlowsContext {
  client: RedisClient
  keys: QueueKeys
  queue: string
  call<T>(what: string, fn: () => Promise<T>): Promise<T>
  /** A run moved its job to `waiting-children`: the worker ends the run without finishing it. */
  moved?(id: string, token: string): void
}

/** Most children one page of getDependencies returns. */
const MAX_PAGE = 10_000

function parseValues(raw: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, text] of Object.entries(raw)) {
    try {
      out[key] = JSON.parse(text)
    } catch {
      out[key] = text
    }
  }
  return out
}

const pairsOf = (flat: string[]) => {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i] as string] = flat[i + 1] as string
  return out
}

/** The kinds asked for (BullMQ: those given a truthy value; none given: all). */
function kindsOf(what: string, options: unknown): Kind[] {
  const o = checkKnown(what, options ?? {}, [...KINDS])
  const asked = KINDS.filter((k) => o[k])
  return asked.length > 0 ? asked : [...KINDS]
}

export function jobFlows(ctx: JobFlowsContext): JobFlows {
  const { client, keys, queue, call } = ctx
  return {
    async getChildrenValues(job) {
      return parseValues(await call('read the children values of a job of queue', () => commands.readProcessed(client, keys, job.id)))
    },
    getIgnoredChildrenFailures(job) {
      return call('read the ignored children failures of a job of queue', () => commands.readIgnoredFailures(client, keys, job.id))
    },
    async getDependencies(job, options) {
      const o = checkKnown('getDependencies', options ?? {}, [...KINDS])
      const asked = KINDS.filter((k) => o[k] !== undefined && o[k] !== false)
      if (asked.length === 0) {
        const all = await call('read the dependencies of a job of queue', () => commands.readDependencies(client, keys, job.id))
        return { processed: parseValues(all.processed), unprocessed: all.unprocessed, ignored: all.ignored, failed: all.failed }
      }
      const out: Dependencies = {}
      for (const kind of asked) {
        const p = checkKnown(`getDependencies ${kind}`, o[kind] === true ? {} : o[kind], ['cursor', 'count'])
        const cursor = opt(p.cursor, 0, (v) => checkInteger(`${kind}.cursor`, v, { min: 0, max: Number.MAX_SAFE_INTEGER }))
        const count = opt(p.count, 20, (v) => checkInteger(`${kind}.count`, v, { min: 1, max: MAX_PAGE }))
        const page = await call('read the dependencies of a job of queue', () =>
          commands.readDependencyPage(client, keys, job.id, kind, cursor, count),
        )
        if (kind === 'processed') Object.assign(out, { processed: parseValues(pairsOf(page.items)), nextProcessedCursor: page.next })
        if (kind === 'ignored') Object.assign(out, { ignored: pairsOf(page.items), nextIgnoredCursor: page.next })
        if (kind === 'unprocessed') Object.assign(out, { unprocessed: page.items, nextUnprocessedCursor: page.next })
        if (kind === 'failed') Object.assign(out, { failed: page.items, nextFailedCursor: page.next })
      }
      return out
    },
    async getDependenciesCount(job, options) {
      const kinds = kindsOf('getDependenciesCount', options)
      const counts = await call('count the dependencies of a job of queue', () => commands.countDependencies(client, keys, job.id, kinds))
      return Object.fromEntries(kinds.map((k, i) => [k, counts[i] ?? 0]))
    },
    removeChildDependency(job) {
      return call('remove a child dependency of a job of queue', () => removeChildDependency(client, keys, queue, job.id, job.parentKey))
    },
    removeUnprocessedChildren(job) {
      return call('remove the unprocessed children of a job of queue', () => removeUnprocessedChildren(client, keys, job.id))
    },
    async moveToWaitingChildren(job, token, options) {
      if (typeof token !== 'string') fail('ERR_OPTIONS', `expected token to be a string, got: ${describe(token)}`)
      const o = checkKnown('moveToWaitingChildren', options ?? {}, ['child'])
      let childKey = ''
      if (o.child !== undefined) {
        const c = checkKnown('moveToWaitingChildren child', o.child, ['id', 'queue'])
        if (typeof c.id !== 'string' || typeof c.queue !== 'string' || !parseJobKey(c.queue))
          fail('ERR_OPTIONS', `expected child to be { id, queue: <queue.qualifiedName> }, got: ${describe(o.child)}`)
        childKey = `${c.queue}:${c.id}`
      }
      const out = await call('move a job to waiting-children in queue', () =>
        commands.moveToWaitingChildren(client, keys, job.id, token, childKey),
      )
      switch (out.status) {
        case 'ok':
          ctx.moved?.(job.id, token)
          return true
        case 'none':
          return false
        case 'missing':
          throw new EchoMQError('ERR_JOB_MISSING', `job ${job.id} of queue ${queue} does not exist: it was not moved to waiting-children`)
        case 'lost':
          throw new EchoMQError('ERR_LOCK_LOST', `job ${job.id} of queue ${queue}: this run does not hold its lease; it was not moved`)
        case 'failed-children':
          // BullMQ's UnrecoverableError: thrown on by the processor, the job fails at once, whatever attempts remain.
          throw new UnrecoverableError(`job ${job.id} of queue ${queue} has failed children (failParentOnFailure): it was not moved`)
        default:
          throw new EchoMQError(
            'ERR_JOB_STATE',
            `job ${job.id} of queue ${queue} is ${out.state}, not active: it was not moved to waiting-children`,
          )
      }
    },
  }
}
