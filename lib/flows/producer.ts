/**
 * FlowProducer: BullMQ 6.7's flows (parent and child jobs). `add(flow, opts?)` and `addBulk(flows)` write
 * trees of any depth, children in the same or other queues, and resolve to BullMQ's JobNode shape
 * `{ job, children? }`; `getFlow({ id, queueName, prefix?, depth?, maxChildren? })` reads one back; `close()`.
 * A parent waits in `waiting-children` until all its children have settled, then goes to `wait` (or
 * `delayed`, or `prioritized`) and runs once (lua/settleChild-9.lua); its processor reads their results with
 * job.getChildrenValues(). How a child's outcome reaches a parent in another slot: lib/flows/handoffs.ts.
 *
 * Options: connection (as a Queue's), prefix ('emq', for the nodes that name none), maxDataBytes (1 MiB).
 */
import { EventEmitter } from 'node:events'
import { EchoMQError, redisError } from '../errors.js'
import { Job, type StoredState } from '../job.js'
import { jobOpts } from '../job-opts.js'
import { DEFAULTS, PREFIX_DEFAULT, setting, validatePrefix } from '../options.js'
import { addedOption } from '../queue/job-scope.js'
import { Queue, queueCoreOf } from '../queue.js'
import type { NewJob } from '../redis/commands.js'
import { type Connection, closeConnection, lastConnectionError, openConnection, resilient } from '../redis/connection.js'
import type { ConnectionOptions } from '../redis/connection-options.js'
import { withFlowFields } from '../redis/job-codec.js'
import { checkKnown, describe, fail, opt } from '../validate.js'
import { type FlowNodeQuery, type JobNode, readFlow } from './get-flow.js'
import { type FlowJob, type FlowOpts, type PlannedNode, planFlows } from './tree.js'
import { type Written, withoutOrphans, writeFlows } from './writing.js'

export type { JobNode } from './get-flow.js'
export type { FlowChildJob, FlowJob, FlowOpts } from './tree.js'

export interface FlowProducerOptions {
  connection?: ConnectionOptions | undefined
  prefix?: string
  maxDataBytes?: number
}

/** How long a call waits for Redis, reconnects included (a Queue's bound). */
const COMMAND_TIMEOUT_MS = 5_000

export class FlowProducer extends EventEmitter {
  private readonly conn: Connection
  private readonly prefix: string
  private readonly maxDataBytes: number
  /** The Queues the returned jobs act through, one per prefix and name, on this producer's connection. */
  private readonly queues = new Map<string, Queue>()
  private closing: Promise<void> | undefined

  constructor(options?: FlowProducerOptions) {
    super()
    const o = checkKnown('FlowProducer', options ?? {}, ['connection', 'prefix', 'maxDataBytes'])
    this.prefix = opt(o.prefix, PREFIX_DEFAULT, validatePrefix)
    this.maxDataBytes = opt(o.maxDataBytes, DEFAULTS.maxDataBytes, setting('maxDataBytes'))
    this.conn = openConnection(o.connection, { redisOptions: resilient(undefined, COMMAND_TIMEOUT_MS) })
  }

  /**
   * Adds a flow: the root (with `opts.parent`, a child of an existing job) and all its descendants. Every
   * node is validated first (a bad one rejects the call, nothing written). Resolves to the tree of Jobs.
   */
  async add(flow: FlowJob, opts?: FlowOpts): Promise<JobNode> {
    const [node] = await this.write([flow], opts)
    return node as JobNode
  }

  /**
   * Adds several flows, validated together first; resolves to their trees, in order. A root whose
   * `opts.parent` does not exist is left out with its tree, the others written (BullMQ 6.7's): its node is
   * returned all the same, its job not in Redis (getState(): 'unknown').
   */
  async addBulk(flows: FlowJob[]): Promise<JobNode[]> {
    if (!Array.isArray(flows)) fail('ERR_OPTIONS', `expected addBulk to be given an array of flows, got: ${describe(flows)}`)
    if (flows.length === 0) return []
    return this.write(flows, undefined, true)
  }

  /**
   * The tree under job `id` of `queueName` (BullMQ's getFlow): up to `depth` levels (10) and `maxChildren`
   * children of each kind per parent (20); undefined when there is no such job.
   */
  async getFlow(query: FlowNodeQuery): Promise<JobNode | undefined> {
    this.assertOpen()
    return this.call('read a flow of queue', query.queueName, () => readFlow(query, this.prefix, (p, q) => this.queue(p, q)))
  }

  /** Closes the connection (if EchoMQ opened it) after the calls in flight. Safe to call more than once. */
  close(): Promise<void> {
    this.closing ??= Promise.all([...this.queues.values()].map((q) => q.close())).then(() => closeConnection(this.conn))
    return this.closing
  }

  /** Resolves once the connection answers. */
  async waitUntilReady(): Promise<void> {
    this.assertOpen()
    await this.call('connect to Redis for queue', '', () => this.conn.client.ping())
  }

  /** `bulk`: roots under a missing parent are left out (addBulk), rather than refusing the call (add). */
  private async write(flows: unknown[], opts: FlowOpts | undefined, bulk = false): Promise<JobNode[]> {
    this.assertOpen()
    const o = checkKnown('FlowProducer.add opts', opts ?? {}, ['queuesOptions'])
    const plan = planFlows(flows, {
      prefix: this.prefix,
      maxDataBytes: this.maxDataBytes,
      queuesOptions: o.queuesOptions as FlowOpts['queuesOptions'],
    })
    const queue = (plan.roots[0] as PlannedNode).queue
    const written = await this.call('add a flow to queue', queue, async () => {
      const { roots, nodes } = bulk ? await withoutOrphans(this.conn.client, plan) : plan
      return writeFlows(this.conn.client, roots, nodes)
    })
    return plan.roots.map((r) => this.jobNode(r, written))
  }

  private jobNode(n: PlannedNode, written: Map<PlannedNode, Written>): JobNode {
    const a = n.args
    const createdOn = written.get(n)?.createdOn ?? 0
    const state: StoredState =
      n.children.length > 0 ? 'waiting-children' : a.delayMs > 0 ? 'delayed' : a.priority > 0 ? 'prioritized' : 'wait'
    const core = queueCoreOf(this.queue(n.prefix, n.queue))
    const job = new Job(
      {
        id: a.id,
        name: a.name,
        data: n.data ?? {},
        attempts: a.attempts,
        attemptsMade: 0,
        attemptsStarted: 0,
        createdOn,
        state,
        opts: jobOpts(a.id, createdOn, a.attempts, (f) => addedOption(a as NewJob, f)),
        ...(a.priority > 0 ? { priority: a.priority } : {}),
        ...(state === 'delayed' ? { dueAt: createdOn + a.delayMs } : {}),
      },
      core.scope,
    )
    // Its parentKey, parent and their options in job.opts (parent, the failure policy), as a read gives them.
    if (a.parentKey !== '') withFlowFields(job, a.parentKey, a.parent)
    return n.children.length > 0 ? { job, children: n.children.map((c) => this.jobNode(c, written)) } : { job }
  }

  private queue(prefix: string, name: string): Queue {
    const at = `${prefix}\n${name}`
    let q = this.queues.get(at)
    if (!q) {
      q = new Queue(name, { connection: this.conn.client, prefix })
      this.queues.set(at, q)
    }
    return q
  }

  private async call<T>(what: string, queue: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      if (err instanceof EchoMQError) throw err
      throw redisError(queue, what, err, lastConnectionError(this.conn.client))
    }
  }

  private assertOpen(): void {
    if (this.closing) throw new EchoMQError('ERR_CLOSED', 'the FlowProducer is closed')
  }
}
