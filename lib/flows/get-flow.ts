/**
 * FlowProducer.getFlow: a job and its children, read back a level at a time (BullMQ's getFlow and JobNode):
 * for each job, a page of at most `maxChildren` of each kind of child (processed, unprocessed, failed,
 * ignored), down to `depth` levels. Bounded: at most maxChildren * 4 children per job read.
 */
import type { Job } from '../job.js'
import { validateJobId, validatePrefix, validateQueueName } from '../options.js'
import type { Queue } from '../queue.js'
import { parseJobKey } from '../redis/keys.js'
import { checkInteger, checkKnown, opt } from '../validate.js'

/** BullMQ's JobNode: a job, and the nodes of its children when it has any. */
export interface JobNode {
  job: Job
  children?: JobNode[]
}

export interface FlowNodeQuery {
  id: string
  queueName: string
  prefix?: string
  /** Levels to read, the job's own included (10). */
  depth?: number
  /** Children of each kind read per job (20). */
  maxChildren?: number
}

export async function readFlow(
  query: FlowNodeQuery,
  defaultPrefix: string,
  queueOf: (prefix: string, name: string) => Queue,
): Promise<JobNode | undefined> {
  const o = checkKnown('getFlow', query, ['id', 'queueName', 'prefix', 'depth', 'maxChildren'])
  const id = validateJobId(o.id)
  const queueName = validateQueueName(o.queueName)
  const prefix = opt(o.prefix, defaultPrefix, validatePrefix)
  const depth = opt(o.depth, 10, (v) => checkInteger('depth', v, { min: 1, max: 100 }))
  const maxChildren = opt(o.maxChildren, 20, (v) => checkInteger('maxChildren', v, { min: 1, max: 1_000 }))
  return node(queueOf(prefix, queueName), id, depth, maxChildren, queueOf)
}

async function node(
  queue: Queue,
  id: string,
  depth: number,
  maxChildren: number,
  queueOf: (prefix: string, name: string) => Queue,
): Promise<JobNode | undefined> {
  const job = await queue.getJob(id)
  if (!job) return undefined
  const page = { count: maxChildren }
  const d = await job.getDependencies({ processed: page, unprocessed: page, failed: page, ignored: page })
  const keys = [...Object.keys(d.processed ?? {}), ...(d.unprocessed ?? []), ...(d.failed ?? []), ...Object.keys(d.ignored ?? {})]
  if (keys.length === 0 || depth <= 1) return { job }
  const children = await Promise.all(
    keys.map((key) => {
      const at = parseJobKey(key)
      return at ? node(queueOf(at.prefix, at.queue), at.id, depth - 1, maxChildren, queueOf) : Promise.resolve(undefined)
    }),
  )
  return { job, children: children.filter((c): c is JobNode => c !== undefined) }
}
