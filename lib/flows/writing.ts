/**
 * Writes planned flows (tree.ts) top-down: first a root added under an existing job joins that job's
 * dependencies (adoptChild-4.lua; a missing parent refuses the call with nothing written), then the tree a
 * level at a time, each level's nodes of one queue in one MULTI (addFlow-10.lua: a parent with all its
 * children's keys already in its dependencies), the queues of a level side by side. A parent is thus
 * complete before any child exists: no child can end before its parent counts it, and no parent runs early.
 * While it writes, the parents are in their queue's `adding` set; a producer that dies midway leaves them
 * there, and the sweep of their queue fails the children it never wrote (lib/flows/adding.ts).
 */
import { batchesOf } from '../batches.js'
import { EchoMQError } from '../errors.js'
import { addFlowNodes, adoptChildren, doneAdding, jobsExist, type NodeCode, settleChildren, TAKE_MAX_BYTES } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { queueKeys } from '../redis/keys.js'
import { deliverHandoffs } from './handoffs.js'
import type { PlannedNode } from './tree.js'

/** Most nodes, and bytes of their data and children's keys, in one script call (the calls of a MULTI). */
const NODES_PER_CALL = 200
const BYTES_PER_CALL = TAKE_MAX_BYTES

export interface Written {
  createdOn: number
  code: NodeCode
}

const keyOf = (n: PlannedNode) => queueKeys(n.prefix, n.queue).job(n.args.id)

/** Most children one adoption (or its undoing) names: one call stays well under Redis's argument limits. */
const ADOPT_PER_CALL = 200

/**
 * Roots added under existing jobs join their dependencies, those of one parent in calls of ADOPT_PER_CALL;
 * on a missing parent, those joined leave again.
 */
async function adoptRoots(client: RedisClient, roots: PlannedNode[]): Promise<void> {
  const byParent = new Map<string, { parent: NonNullable<PlannedNode['attachTo']>; keys: string[] }>()
  for (const root of roots) {
    const p = root.attachTo
    if (!p) continue
    const at = queueKeys(p.prefix, p.queue).job(p.id)
    const group = byParent.get(at) ?? { parent: p, keys: [] }
    group.keys.push(keyOf(root))
    byParent.set(at, group)
  }
  const done: { parent: NonNullable<PlannedNode['attachTo']>; keys: string[] }[] = []
  for (const [at, { parent, keys }] of byParent) {
    const parentKeys = queueKeys(parent.prefix, parent.queue)
    for (let i = 0; i < keys.length; i += ADOPT_PER_CALL) {
      const some = keys.slice(i, i + ADOPT_PER_CALL)
      if (await adoptChildren(client, parentKeys, parent.id, some)) {
        done.push({ parent, keys: some })
        continue
      }
      for (const d of done) {
        const drops = d.keys.map((childKey) => ({ parentId: d.parent.id, childKey, outcome: 'removed' as const, value: '' }))
        await settleChildren(client, queueKeys(d.parent.prefix, d.parent.queue), drops)
      }
      throw new EchoMQError('ERR_JOB_MISSING', `Missing key for parent job ${at}: nothing was added`)
    }
  }
}

/** Calls of at most NODES_PER_CALL nodes and BYTES_PER_CALL bytes. */
function callsOf(nodes: PlannedNode[]): PlannedNode[][] {
  const sizeOf = (n: PlannedNode) => n.args.data.length + n.args.children.reduce((s, k) => s + k.length + 1, 0)
  return batchesOf(nodes, { count: NODES_PER_CALL, bytes: BYTES_PER_CALL }, sizeOf)
}

/** Writes the nodes (in depth order) of planned flows; resolves to what each node's write said. */
export async function writeFlows(client: RedisClient, roots: PlannedNode[], nodes: PlannedNode[]): Promise<Map<PlannedNode, Written>> {
  await adoptRoots(client, roots)
  const out = new Map<PlannedNode, Written>()
  const refused: PlannedNode[] = []
  const parents = new Map<PlannedNode, PlannedNode>()
  for (const n of nodes) for (const c of n.children) parents.set(c, n)
  for (let at = 0; at < nodes.length; ) {
    const depth = (nodes[at] as PlannedNode).depth
    const level: PlannedNode[] = []
    while (at < nodes.length && (nodes[at] as PlannedNode).depth === depth) level.push(nodes[at++] as PlannedNode)
    const byQueue = new Map<string, PlannedNode[]>()
    for (const n of level) {
      const q = `${n.prefix}\n${n.queue}`
      const group = byQueue.get(q)
      if (group) group.push(n)
      else byQueue.set(q, [n])
    }
    await Promise.all(
      [...byQueue.values()].map(async (group) => {
        const first = group[0] as PlannedNode
        const calls = callsOf(group)
        const keys = queueKeys(first.prefix, first.queue)
        const { createdOn, codes, handoffs } = await addFlowNodes(
          client,
          keys,
          calls.map((c) => c.map((n) => n.args)),
        )
        // Existing jobs that had ended joined their new parents: told now (a parent added again over its
        // completed child runs at once, as BullMQ's); its parent already counts all its children.
        if (handoffs.length > 0) await deliverHandoffs(client, keys, handoffs)
        for (const [i, n] of calls.flat().entries()) {
          const code = codes[i] ?? 'added'
          out.set(n, { createdOn, code })
          if (code === 'refused') refused.push(n)
        }
      }),
    )
  }
  await doneWith(client, nodes, roots)
  if (refused.length > 0) await dropRefused(client, refused, parents)
  return out
}

/** Every child is written: the parents leave `adding` (lib/flows/adding.ts), those of the tree and those adopting a root. */
async function doneWith(client: RedisClient, nodes: PlannedNode[], roots: PlannedNode[]): Promise<void> {
  const byQueue = new Map<string, { prefix: string; queue: string; ids: string[] }>()
  const add = (prefix: string, queue: string, id: string) => {
    const at = `${prefix}\n${queue}`
    const group = byQueue.get(at) ?? { prefix, queue, ids: [] }
    group.ids.push(id)
    byQueue.set(at, group)
  }
  for (const n of nodes) if (n.children.length > 0) add(n.prefix, n.queue, n.args.id)
  for (const r of roots) if (r.attachTo) add(r.attachTo.prefix, r.attachTo.queue, r.attachTo.id)
  // Many children of one parent (an addBulk) name it once.
  await Promise.all([...byQueue.values()].map((g) => doneAdding(client, queueKeys(g.prefix, g.queue), [...new Set(g.ids)])))
}

/** A node that has another parent already stays with it (BullMQ's ParentJobCannotBeReplaced): its new parent stops waiting for it. */
async function dropRefused(client: RedisClient, refused: PlannedNode[], parents: Map<PlannedNode, PlannedNode>): Promise<void> {
  for (const n of refused) {
    const p = parents.get(n)
    const at = p ? { prefix: p.prefix, queue: p.queue, id: p.args.id } : n.attachTo
    if (at)
      await settleChildren(client, queueKeys(at.prefix, at.queue), [{ parentId: at.id, childKey: keyOf(n), outcome: 'removed', value: '' }])
  }
  const names = refused.map((n) => `${n.queue}/${n.args.id}`).join(', ')
  throw new EchoMQError('ERR_JOB_STATE', `The parent of job(s) ${names} cannot be replaced: they keep the parent they have (BullMQ's -7)`)
}

/**
 * FlowProducer.addBulk's roots whose `opts.parent` does not exist, left out with their trees while the others
 * are written, as BullMQ 6.7's addBulk leaves them (it resolves with every root's tree, those not in Redis).
 * A parent removed after this read still refuses the whole call (adoptRoots), as `add` is refused.
 */
export async function withoutOrphans(client: RedisClient, plan: { roots: PlannedNode[]; nodes: PlannedNode[] }) {
  const attached = plan.roots.flatMap((r) => (r.attachTo ? [{ root: r, parent: r.attachTo }] : []))
  if (attached.length === 0) return plan
  const exist = await jobsExist(
    client,
    attached.map(({ parent: p }) => queueKeys(p.prefix, p.queue).job(p.id)),
  )
  const left = new Set<PlannedNode>()
  const leave = (n: PlannedNode): void => {
    left.add(n)
    for (const c of n.children) leave(c)
  }
  for (const [i, { root }] of attached.entries()) if (!exist[i]) leave(root)
  if (left.size === 0) return plan
  return { roots: plan.roots.filter((r) => !left.has(r)), nodes: plan.nodes.filter((n) => !left.has(n)) }
}
