/**
 * A job's flow options, BullMQ 6.7's: `parent` ({ id, queue }: the parent's id and its queue's qualified
 * name, `queue.qualifiedName`, `<prefix>:{name}`) and the failure policy of a child, at most one of
 * failParentOnFailure, continueParentOnFailure, ignoreDependencyOnFailure and removeDependencyOnFailure
 * (BullMQ's exclusive options; kept in the child's `parent` field as fpof, cpof, idof, rdof). Validated
 * before any Redis call.
 */
import { validateJobId, validatePrefix, validateQueueName } from '../options.js'
import { parseJobKey, qualifiedName, queueKeys } from '../redis/keys.js'
import { describe, fail } from '../validate.js'

const POLICY_NAMES = {
  failParentOnFailure: 'fpof',
  continueParentOnFailure: 'cpof',
  ignoreDependencyOnFailure: 'idof',
  removeDependencyOnFailure: 'rdof',
} as const
type PolicyOption = keyof typeof POLICY_NAMES
export type Policy = (typeof POLICY_NAMES)[PolicyOption]

/** A parent named by a child: where it lives. */
export interface ParentRefOption {
  prefix: string
  queue: string
  id: string
}

/** The flow options of a job, validated (none: {}). */
export interface FlowSettings {
  parent?: ParentRefOption
  policy?: Policy
}

/**
 * A parent's queue as BullMQ names it: `<prefix>:{name}` (EchoMQ's qualified name), or BullMQ's
 * `<prefix>:<name>` (the prefix then the text before the first ':').
 */
function parentQueue(text: unknown): { prefix: string; queue: string } {
  if (typeof text !== 'string') fail('ERR_OPTIONS', `expected parent.queue to be a queue's qualifiedName, got: ${describe(text)}`)
  const tagged = parseJobKey(text)
  if (tagged && tagged.id === '') return { prefix: validatePrefix(tagged.prefix), queue: validateQueueName(tagged.queue) }
  const sep = text.indexOf(':')
  if (tagged || sep < 1)
    fail('ERR_OPTIONS', `expected parent.queue to be a queue's qualifiedName (<prefix>:{name}), got: ${describe(text)}`)
  return { prefix: validatePrefix(text.slice(0, sep)), queue: validateQueueName(text.slice(sep + 1)) }
}

export function flowSettings(o: Record<string, unknown>): FlowSettings {
  const out: FlowSettings = {}
  if (o.parent !== undefined) {
    const p = o.parent as { id?: unknown; queue?: unknown } | null
    if (typeof p !== 'object' || p === null) fail('ERR_OPTIONS', `expected parent to be { id, queue }, got: ${describe(o.parent)}`)
    const extra = Object.keys(p).filter((k) => k !== 'id' && k !== 'queue')
    if (extra.length > 0) fail('ERR_OPTIONS', `unknown option parent.${extra[0]}: expected parent to be { id, queue }`)
    out.parent = { ...parentQueue(p.queue), id: validateJobId(p.id) }
  }
  const given = (Object.keys(POLICY_NAMES) as PolicyOption[]).filter((name) => {
    const v = o[name]
    if (v !== undefined && typeof v !== 'boolean') fail('ERR_OPTIONS', `expected ${name} to be true or false, got: ${describe(v)}`)
    return v === true
  })
  if (given.length > 1) fail('ERR_OPTIONS', `The following options cannot be used together: ${given.join(', ')}`)
  if (given[0] !== undefined) out.policy = POLICY_NAMES[given[0]]
  return out
}

/** The `parentKey` and `parent` fields a child of `parent` stores (BullMQ's shapes). */
export function parentFields(parent: ParentRefOption, policy: Policy | undefined): { parentKey: string; parent: string } {
  return {
    parentKey: queueKeys(parent.prefix, parent.queue).job(parent.id),
    parent: JSON.stringify({ id: parent.id, queueKey: qualifiedName(parent.prefix, parent.queue), ...(policy ? { [policy]: true } : {}) }),
  }
}
