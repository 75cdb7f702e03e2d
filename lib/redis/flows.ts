/**
 * Flows (parents and children, lib/flows/): addFlow-10 writes one queue's nodes of a tree, adoptChild-4 makes
 * room for a child of an existing job, settleChild-9 tells parents what their children ended with,
 * moveToWaitingChildren-10 parks a running parent, detachChild-2 takes a child from its parent; and the plain reads and deletes of a parent's
 * dependencies and a queue's outbox (`handoffs`). Each function owns its script's KEYS and ARGV order.
 */
import type { RedisClient } from './connection.js'
import type { EncodedOptions } from './job-codec.js'
import type { QueueKeys } from './keys.js'
import { evalInTransaction, evalScript, eventKeys } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const FLOW_SCRIPTS = {
  addFlow: 'addFlow-10.lua',
  adoptChild: 'adoptChild-4.lua',
  settleChild: 'settleChild-9.lua',
  moveToWaitingChildren: 'moveToWaitingChildren-10.lua',
  forgetHandoffs: 'forgetHandoffs-1.lua',
  detachChild: 'detachChild-2.lua',
} as const

/** One node of a flow, as addFlow-10.lua writes it. */
export interface FlowNodeArgs extends EncodedOptions {
  id: string
  name: string
  /** JSON text. */
  data: string
  /** The parent's job key and BullMQ's `parent` field (JSON), or '' for a root. */
  parentKey: string
  parent: string
  /** The children's job keys (a parent), [] for a leaf. */
  children: string[]
}

/** A node's nine option values, as add-7.lua takes them (addFlow-10.lua's option sets). */
const optionArgs = (n: FlowNodeArgs) => [
  n.attempts,
  n.delayMs,
  n.backoff,
  n.keep,
  n.keepFailed,
  n.keepLogs ?? '',
  n.priority,
  n.lifo ? '1' : '',
  n.stackTraceLimit,
]

/** A node's children as addFlow-10.lua takes them: ids of this queue's, then (after an empty line) other keys. */
function childLines(keys: QueueKeys, children: string[]): string {
  const prefix = keys.job('')
  const own: string[] = []
  const other: string[] = []
  for (const key of children) {
    if (key.startsWith(prefix) && key.length > prefix.length) own.push(key.slice(prefix.length))
    else other.push(key)
  }
  return other.length === 0 ? own.join('\n') : `${own.join('\n')}\n\n${other.join('\n')}`
}

/**
 * One addFlow-10.lua call's keys and arguments: the option sets and the parents the nodes share go once
 * (a parent's children have one parent and mostly one set of options), each node names them by number.
 */
function addFlowCall(keys: QueueKeys, fixed: string[], nodes: FlowNodeArgs[]): { keys: string[]; args: (string | number)[] } {
  const optionSets = new Map<string, number>()
  const optionValues: (string | number)[] = []
  const parents = new Map<string, number>()
  const parentValues: string[] = []
  const callKeys = [...fixed]
  const nodeValues: (string | number)[] = []
  for (const n of nodes) {
    const values = optionArgs(n)
    const set = values.join('\n')
    let o = optionSets.get(set)
    if (o === undefined) {
      o = optionSets.size + 1
      optionSets.set(set, o)
      optionValues.push(...values)
    }
    let p = 0
    if (n.parentKey !== '') {
      const at = `${n.parentKey}\n${n.parent}`
      p = parents.get(at) ?? parents.size + 1
      if (!parents.has(at)) {
        parents.set(at, p)
        parentValues.push(n.parentKey, n.parent)
      }
    }
    callKeys.push(keys.job(n.id))
    if (n.children.length > 0) callKeys.push(keys.dependencies(n.id))
    nodeValues.push(n.name, n.data, `${o}.${p}`, childLines(keys, n.children))
  }
  return { keys: callKeys, args: [optionSets.size, parents.size, ...optionValues, ...parentValues, ...nodeValues] }
}

/** What addFlow-10.lua said of a node: added, existed (joined its parent), or refused (it has another parent). */
export type NodeCode = 'added' | 'existed' | 'refused'

/**
 * Writes nodes of one queue in calls sent in one MULTI (all or none); resolves to when they were
 * created (ms, Redis's clock), a code per node, in order, and the hand-offs written (id, entry) by existing
 * jobs that had ended.
 */
export async function addFlowNodes(
  client: RedisClient,
  keys: QueueKeys,
  calls: FlowNodeArgs[][],
): Promise<{ createdOn: number; codes: NodeCode[]; handoffs: [string, string][] }> {
  const fixed = [
    keys.wait,
    keys.delayed,
    keys.marker,
    ...eventKeys(keys),
    keys.prioritized,
    keys.waitingChildren,
    keys.handoffs,
    keys.adding,
  ]
  const replies = await evalInTransaction(
    client,
    FLOW_SCRIPTS.addFlow,
    calls.map((nodes) => addFlowCall(keys, fixed, nodes)),
  )
  let createdOn = 0
  const codes: NodeCode[] = []
  const handoffs: [string, string][] = []
  for (const reply of replies) {
    const [now, list, written] = reply as [number, number[], string[]]
    createdOn = now
    for (const c of list) codes.push(c === 1 ? 'added' : c === 0 ? 'existed' : 'refused')
    for (let i = 0; i + 1 < written.length; i += 2) handoffs.push([written[i] as string, written[i + 1] as string])
  }
  return { createdOn, codes, handoffs }
}

/** Adds child keys to an existing job's dependencies; false (nothing written) when there is no such job. */
export async function adoptChildren(client: RedisClient, keys: QueueKeys, parentId: string, childKeys: string[]): Promise<boolean> {
  const reply = await evalScript(
    client,
    FLOW_SCRIPTS.adoptChild,
    [keys.job(parentId), keys.dependencies(parentId), keys.adding, keys.meta],
    [parentId, ...childKeys],
  )
  return reply === 1
}

/** The producer wrote every child of these parents: they leave `adding`. */
export async function doneAdding(client: RedisClient, keys: QueueKeys, parentIds: string[]): Promise<void> {
  if (parentIds.length > 0) await client.zrem(keys.adding, ...parentIds)
}

/** Whether each of these job keys (in any queue) exists: one EXISTS each, pipelined (a cluster routes each). */
export async function jobsExist(client: RedisClient, jobKeys: string[]): Promise<boolean[]> {
  return Promise.all(jobKeys.map(async (key) => (await client.exists(key)) === 1))
}

/** A parent's pending children (its dependencies), all of them. */
export function pendingChildren(client: RedisClient, keys: QueueKeys, id: string): Promise<string[]> {
  return client.smembers(keys.dependencies(id))
}

/** A child's outcome for its parent: completed, removed, or a failure under its policy (BullMQ's fpof...). */
export type ChildOutcome = 'completed' | 'removed' | 'fpof' | 'cpof' | 'idof' | 'rdof' | 'retried'

export interface Settlement {
  parentId: string
  childKey: string
  outcome: ChildOutcome
  /** The return value (JSON) or the failed reason. */
  value: string
  /** How many times the child had been retried when it ended (its run's generation; 0 when absent). */
  gen?: number
  /**
   * The child's id when it is a job of the parent's queue whose outbox entry this delivers: the call deletes
   * the entry too (while it is unchanged), and the child's key goes as its id alone.
   */
  ownId?: string
}

export type SettleCode = 'released' | 'settled' | 'done' | 'missing' | 'stale'
/** settleChild-9.lua's outcome letters (a child's head names its outcome in one). */
const OUTCOME_LETTERS: Record<ChildOutcome, string> = {
  completed: 'c',
  removed: 'r',
  retried: 't',
  fpof: 'f',
  cpof: 'p',
  idof: 'i',
  rdof: 'd',
}
/** settleChild-9.lua's codes, by number. */
const SETTLE_CODES: readonly SettleCode[] = ['released', 'settled', 'done', 'stale', 'missing']

/**
 * Tells parents of one queue what their children ended with (settleChild-9.lua); a code per entry, in order.
 * Each parent's five keys go once per call, and its children together (the script reads a parent once for
 * all of them); a child named twice for one parent starts another call (the script takes it once a call).
 */
export async function settleChildren(client: RedisClient, keys: QueueKeys, entries: Settlement[]): Promise<SettleCode[]> {
  const codes: SettleCode[] = new Array(entries.length)
  for (let start = 0; start < entries.length; ) {
    // A call takes the entries up to the first that names a child of its parent again (they go in order).
    const seen = new Set<string>()
    const byParent = new Map<string, number[]>()
    let end = start
    for (; end < entries.length; end++) {
      const e = entries[end] as Settlement
      const at = `${e.parentId}\n${e.childKey}`
      if (seen.has(at)) break
      seen.add(at)
      const group = byParent.get(e.parentId)
      if (group) group.push(end)
      else byParent.set(e.parentId, [end])
    }
    const perParent = [...byParent.keys()].flatMap((id) => [
      keys.job(id),
      keys.dependencies(id),
      keys.processed(id),
      keys.failedChildren(id),
      keys.unsuccessful(id),
    ])
    const args: (string | number)[] = []
    const order: number[] = []
    let j = 0
    for (const group of byParent.values()) {
      args.push(++j, group.length)
      for (const i of group) {
        const e = entries[i] as Settlement
        args.push(`${OUTCOME_LETTERS[e.outcome]}${e.gen ? e.gen : ''}${e.ownId === undefined ? `:${e.childKey}` : `=${e.ownId}`}`, e.value)
        order.push(i)
      }
    }
    const reply = String(
      await evalScript(
        client,
        FLOW_SCRIPTS.settleChild,
        [keys.waitingChildren, keys.wait, keys.prioritized, keys.delayed, keys.marker, ...eventKeys(keys), keys.handoffs, ...perParent],
        args,
      ),
    )
    for (const [n, i] of order.entries()) codes[i] = SETTLE_CODES[Number(reply[n]) - 1] as SettleCode
    start = end
  }
  return codes
}

export type WaitingChildrenStatus = 'ok' | 'none' | 'failed-children' | 'missing' | 'lost' | 'not-active'

/** Parks a job in flight in `waiting-children` while it has pending children (moveToWaitingChildren-10.lua). */
export async function moveToWaitingChildren(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  token: string,
  childKey: string,
): Promise<{ status: WaitingChildrenStatus; state?: string }> {
  const [status, state] = (await evalScript(
    client,
    FLOW_SCRIPTS.moveToWaitingChildren,
    [
      keys.job(id),
      keys.lock(id),
      keys.active,
      keys.stalled,
      keys.waitingChildren,
      keys.dependencies(id),
      keys.unsuccessful(id),
      ...eventKeys(keys),
    ],
    [id, token, childKey],
  )) as [WaitingChildrenStatus, string?]
  return state === undefined ? { status } : { status, state }
}

/** Deletes delivered entries of a queue's outbox, each only while it is the entry delivered (forgetHandoffs-1.lua). */
export async function removeHandoffs(client: RedisClient, keys: QueueKeys, entries: [string, string][]): Promise<void> {
  if (entries.length === 0) return
  await evalScript(client, FLOW_SCRIPTS.forgetHandoffs, [keys.handoffs], [...entries.map(([id]) => id), ...entries.map(([, e]) => e)])
}

/** A page of a queue's outbox (HSCAN from `cursor`, about `count`): child id -> entry, and the next cursor ("0": the end). */
export async function outboxPage(
  client: RedisClient,
  keys: QueueKeys,
  cursor: string,
  count: number,
): Promise<{ next: string; entries: [string, string][] }> {
  const [next, flat] = await client.hscan(keys.handoffs, cursor, 'COUNT', count)
  const entries: [string, string][] = []
  for (let i = 0; i + 1 < flat.length; i += 2) entries.push([flat[i] as string, flat[i + 1] as string])
  return { next, entries }
}

/** A parent's children, all of them: completed (key -> value JSON), pending keys, ignored failures, failing keys. */
export async function readDependencies(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
): Promise<{ processed: Record<string, string>; unprocessed: string[]; ignored: Record<string, string>; failed: string[] }> {
  const [processed, unprocessed, ignored, failed] = await Promise.all([
    client.hgetall(keys.processed(id)),
    client.smembers(keys.dependencies(id)),
    client.hgetall(keys.failedChildren(id)),
    client.zrange(keys.unsuccessful(id), '0', '-1'),
  ])
  return { processed, unprocessed, ignored, failed }
}

/** The kinds of a parent's children, BullMQ's names. */
export type DependencyKind = 'processed' | 'unprocessed' | 'ignored' | 'failed'

/** One page of one kind: HSCAN/SSCAN from `cursor` (`failed`: a ZRANGE from rank `cursor`), about `count`. */
export async function readDependencyPage(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  kind: DependencyKind,
  cursor: number,
  count: number,
): Promise<{ next: number; items: string[] }> {
  switch (kind) {
    case 'processed': {
      const [next, items] = await client.hscan(keys.processed(id), String(cursor), 'COUNT', count)
      return { next: Number(next), items }
    }
    case 'ignored': {
      const [next, items] = await client.hscan(keys.failedChildren(id), String(cursor), 'COUNT', count)
      return { next: Number(next), items }
    }
    case 'unprocessed': {
      const [next, items] = await client.sscan(keys.dependencies(id), String(cursor), 'COUNT', count)
      return { next: Number(next), items }
    }
    case 'failed': {
      const items = await client.zrange(keys.unsuccessful(id), String(cursor), String(cursor + count - 1))
      return { next: cursor + count, items }
    }
  }
}

/** How many children of each kind a parent has. */
export async function countDependencies(client: RedisClient, keys: QueueKeys, id: string, kinds: DependencyKind[]): Promise<number[]> {
  return Promise.all(
    kinds.map((kind) => {
      switch (kind) {
        case 'processed':
          return client.hlen(keys.processed(id))
        case 'ignored':
          return client.hlen(keys.failedChildren(id))
        case 'unprocessed':
          return client.scard(keys.dependencies(id))
        default:
          return client.zcard(keys.unsuccessful(id))
      }
    }),
  )
}

/** A parent's completed children: key -> return value (JSON text). */
export function readProcessed(client: RedisClient, keys: QueueKeys, id: string): Promise<Record<string, string>> {
  return client.hgetall(keys.processed(id))
}

/** A parent's ignored child failures: key -> failed reason. */
export function readIgnoredFailures(client: RedisClient, keys: QueueKeys, id: string): Promise<Record<string, string>> {
  return client.hgetall(keys.failedChildren(id))
}

/** What detachChild-2.lua did: detached (the outbox entry to deliver), an entry still to deliver first, nothing. */
export type DetachReply =
  | { status: 'detached'; entry: string }
  | { status: 'pending'; entry: string }
  | { status: 'none' }
  | { status: 'missing' }

/** A child leaves its parent `parentKey` (detachChild-2.lua): its side, and the parent's entry in its outbox. */
export async function detachChild(client: RedisClient, keys: QueueKeys, id: string, parentKey: string): Promise<DetachReply> {
  const [status, entry] = (await evalScript(client, FLOW_SCRIPTS.detachChild, [keys.job(id), keys.handoffs], [id, parentKey])) as [
    DetachReply['status'],
    string?,
  ]
  if (status === 'detached' || status === 'pending') return { status, entry: entry ?? '' }
  return status === 'missing' ? { status } : { status: 'none' }
}
