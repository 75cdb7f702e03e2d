/**
 * A flow as FlowProducer.add takes it (BullMQ's FlowJob: { name, queueName, data?, prefix?, opts?, children? }),
 * validated and laid out before any Redis call: each node's id (its jobId, else a random one, FLOW_ID_BYTES),
 * its options encoded as the job hash stores them, its parent's fields, its children's keys, and its depth,
 * by which the producer writes the tree top-down. A bad node (name, queue, data, options, a jobId used twice)
 * rejects the whole call with a typed error, and nothing is written.
 */
import { randomBytes } from 'node:crypto'
import { EchoMQError } from '../errors.js'
import { addSettings, JOB_DEFAULTS, type JobOptions, type JobSettings, jobSettings } from '../job-options.js'
import { toJson } from '../json.js'
import { validateJobName, validateNewJobId, validatePrefix, validateQueueName } from '../options.js'
import type { FlowNodeArgs } from '../redis/commands.js'
import { encodeOptions } from '../redis/job-codec.js'
import { queueKeys } from '../redis/keys.js'
import { checkKnown, describe, fail } from '../validate.js'
import { type ParentRefOption, parentFields } from './options.js'

/** A node of a flow (BullMQ's FlowJob). */
export interface FlowJob {
  name: string
  queueName: string
  data?: unknown
  prefix?: string
  opts?: Omit<JobOptions, 'deduplication'>
  children?: FlowChildJob[]
}
/** A child node (BullMQ's FlowChildJob): no `parent` of its own, its place in the tree is its parent. */
export type FlowChildJob = Omit<FlowJob, 'opts'> & { opts?: Omit<JobOptions, 'deduplication' | 'parent'> }

/** FlowProducer.add's second argument: per queue name, the job options its nodes default to (BullMQ's). */
export interface FlowOpts {
  queuesOptions?: Record<string, { defaultJobOptions?: Omit<JobOptions, 'jobId' | 'deduplication' | 'parent'> }>
}

/** A node laid out for writing. */
export interface PlannedNode {
  prefix: string
  queue: string
  depth: number
  args: FlowNodeArgs
  /** The data as given (the Job returned carries it, not its JSON). */
  data: unknown
  children: PlannedNode[]
  /** The root of a flow added under an existing job (its `opts.parent`). */
  attachTo?: ParentRefOption
}

/**
 * A generated node id: 96 random bits in 16 characters (base64url). BullMQ's is a UUID (36 characters, 122
 * bits); the id is in every key and argument that names the job (its add, take, finish, its hand-off to its
 * parent, its trim: some twenty times per job), and 96 bits are as safe from a collision in any queue's life.
 * Not the queue's numbers (lib/queue/job-ids.ts): an existing id joins its new parent (addFlow-10.lua), so a
 * number already taken (its counter reset while jobs remained) would join a stranger's job to the flow.
 */
const FLOW_ID_BYTES = 12
const flowId = () => randomBytes(FLOW_ID_BYTES).toString('base64url')

/** Most jobs one add or addBulk of flows writes: each level of each queue goes in one MULTI. */
const MAX_FLOW_JOBS = 10_000
/** Deepest tree accepted (the reads of getFlow and the writes go a level at a time). */
const MAX_DEPTH = 100

interface Limits {
  prefix: string
  maxDataBytes: number
  queuesOptions: FlowOpts['queuesOptions']
}

/** Validates and lays out flows; the nodes of all of them, in writing order (depth first, then as given). */
export function planFlows(flows: unknown[], limits: Limits): { roots: PlannedNode[]; nodes: PlannedNode[] } {
  const nodes: PlannedNode[] = []
  const seen = new Set<string>()
  const roots = flows.map((flow, i) => planNode(flow, `flow ${i}`, 0, undefined, limits, nodes, seen))
  return { roots, nodes: nodes.sort((a, b) => a.depth - b.depth) }
}

const defaultsFor = (limits: Limits, queue: string, memo: Map<string, JobSettings>): JobSettings => {
  let base = memo.get(queue)
  if (!base) {
    base = jobSettings(`queuesOptions.${queue}.defaultJobOptions`, limits.queuesOptions?.[queue]?.defaultJobOptions, JOB_DEFAULTS)
    memo.set(queue, base)
  }
  return base
}
const memos = new WeakMap<Limits, Map<string, JobSettings>>()

/**
 * Runs a node's own checks with their errors naming the node (`flow 0 child 1: expected a queue name...`),
 * as the tree's checks (a jobId used twice) do: in a tree of many nodes, "a queue name" alone does not say which.
 */
function naming<T>(where: string, check: () => T): T {
  try {
    return check()
  } catch (err) {
    if (!(err instanceof EchoMQError) || err.message.includes(where)) throw err
    throw new EchoMQError(err.code, `${where}: ${err.message}`, { cause: err })
  }
}

function planNode(
  value: unknown,
  where: string,
  depth: number,
  parent: PlannedNode | undefined,
  limits: Limits,
  nodes: PlannedNode[],
  seen: Set<string>,
): PlannedNode {
  // Named by its flow alone: the path to a node past the limit is a hundred "child 0"s long.
  const flow = where.split(' child ')[0]
  if (depth > MAX_DEPTH) fail('ERR_OPTIONS', `${flow}: a flow may be at most ${MAX_DEPTH} levels deep (a node at level ${depth + 1})`)
  if (nodes.length >= MAX_FLOW_JOBS) {
    fail(
      'ERR_OPTIONS',
      `${flow}: a call of FlowProducer adds at most ${MAX_FLOW_JOBS} jobs (the flows given hold more); add them in several calls`,
    )
  }
  const { node, children } = naming(where, () => nodeOf(value, where, depth, parent, limits, seen))
  nodes.push(node)
  node.children = children.map((c, i) => planNode(c, `${where} child ${i}`, depth + 1, node, limits, nodes, seen))
  node.args.children = node.children.map((c) => queueKeys(c.prefix, c.queue).job(c.args.id))
  return node
}

/** One node, its children not yet planned (what it was given for them, an array). */
function nodeOf(
  value: unknown,
  where: string,
  depth: number,
  parent: PlannedNode | undefined,
  limits: Limits,
  seen: Set<string>,
): { node: PlannedNode; children: unknown[] } {
  const o = checkKnown(where, value, ['name', 'queueName', 'data', 'prefix', 'opts', 'children'])
  const name = validateJobName(o.name)
  const queue = validateQueueName(o.queueName)
  const prefix = o.prefix === undefined ? limits.prefix : validatePrefix(o.prefix)
  const memo = memos.get(limits) ?? new Map<string, JobSettings>()
  memos.set(limits, memo)
  const base = defaultsFor(limits, queue, memo)
  const settings = addSettings(o.opts, base, `${where} opts`)
  if (settings.deduplication) fail('ERR_OPTIONS', `${where}: deduplication cannot be used on a flow's jobs`)
  if (settings.flow.parent && parent) fail('ERR_OPTIONS', `${where}: a child's parent is its place in the tree, not opts.parent`)
  const id = settings.jobId === undefined ? flowId() : validateNewJobId(settings.jobId)
  const keys = queueKeys(prefix, queue)
  const key = keys.job(id)
  if (seen.has(key)) fail('ERR_JOB_ID', `${where}: job ${describe(id)} of queue ${queue} appears twice in the flow`)
  seen.add(key)
  const children = o.children === undefined ? [] : o.children
  if (!Array.isArray(children)) fail('ERR_OPTIONS', `${where}: expected children to be an array, got: ${describe(children)}`)
  const up = parent ? { prefix: parent.prefix, queue: parent.queue, id: parent.args.id } : settings.flow.parent
  const fields = up ? parentFields(up, settings.flow.policy) : { parentKey: '', parent: '' }
  const node: PlannedNode = {
    prefix,
    queue,
    depth,
    data: o.data,
    children: [],
    args: {
      ...encodeOptions(settings),
      id,
      name,
      data: toJson(o.data ?? {}, 'job data', limits.maxDataBytes, 'maxDataBytes'),
      ...fields,
      children: [],
    },
    ...(settings.flow.parent ? { attachTo: settings.flow.parent } : {}),
  }
  return { node, children }
}
