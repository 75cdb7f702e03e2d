/**
 * WORKER_FUNCTIONS: the worker functions the reaper starts when jobs wait (scaling.ts), a JSON object keyed
 * by queue name, `{ "emails": { "function": "<name or ARN>", "maxConcurrency": 3, "jobsPerInvocation": 100 } }`:
 *   function           the Lambda function to invoke (a name, a name:alias, or an ARN)
 *   maxConcurrency     most invocations alive at once for the queue (1-1000)
 *   jobsPerInvocation  jobs one invocation starts at most (its event's maxJobs; 1-1,000,000)
 * Checked here, by the reaper's configuration at run time and by serverless/settings.cjs at package time.
 */
import { EchoMQError } from '../errors.js'
import { validateQueueName } from '../options.js'
import { describe } from '../validate.js'

interface WorkerFunction {
  function: string
  maxConcurrency: number
  jobsPerInvocation: number
}

export type WorkerFunctions = Record<string, WorkerFunction>

const FIELDS = ['function', 'maxConcurrency', 'jobsPerInvocation'] as const
/** A function name (with an optional version or alias), or its ARN (Lambda's own pattern). */
const FUNCTION = /^(arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:)?[a-zA-Z0-9_-]{1,64}(:(\$LATEST|[a-zA-Z0-9_-]+))?$/
const RANGES = { maxConcurrency: { min: 1, max: 1_000 }, jobsPerInvocation: { min: 1, max: 1_000_000 } } as const

export function parseWorkerFunctions(value: unknown, variable = 'WORKER_FUNCTIONS'): WorkerFunctions | undefined {
  const bad = (message: string): never => {
    throw new EchoMQError('ERR_CONFIG', `${variable}: ${message}`, {
      variable,
      hint: 'a JSON object keyed by queue name: {"emails":{"function":"my-worker","maxConcurrency":3,"jobsPerInvocation":100}}',
    })
  }
  if (value === undefined || (typeof value === 'string' && value.trim() === '')) return undefined
  let parsed: unknown = value
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value)
    } catch (err) {
      bad(`expected JSON, ${(err as Error).message}`)
    }
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    bad(`expected a JSON object keyed by queue name, got: ${describe(parsed)}`)
  const out: WorkerFunctions = {}
  for (const [queue, entry] of Object.entries(parsed as Record<string, unknown>)) {
    try {
      validateQueueName(queue)
    } catch (err) {
      bad((err as Error).message)
    }
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry))
      bad(`${queue}: expected an object with ${FIELDS.join(', ')}, got: ${describe(entry)}`)
    const e = entry as Record<string, unknown>
    for (const key of Object.keys(e))
      if (!(FIELDS as readonly string[]).includes(key)) bad(`${queue}: unknown field "${key}"; known fields: ${FIELDS.join(', ')}`)
    if (typeof e.function !== 'string' || !FUNCTION.test(e.function))
      bad(`${queue}.function: expected a Lambda function name or ARN, got: ${describe(e.function)}`)
    const int = (key: keyof typeof RANGES): number => {
      const v = e[key]
      const { min, max } = RANGES[key]
      if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
        bad(`${queue}.${key}: expected an integer from ${min} to ${max}, got: ${describe(v)}`)
      return v as number
    }
    out[queue] = { function: e.function as string, maxConcurrency: int('maxConcurrency'), jobsPerInvocation: int('jobsPerInvocation') }
  }
  return Object.keys(out).length === 0 ? undefined : out
}
