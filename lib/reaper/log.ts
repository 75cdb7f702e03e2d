/**
 * The reaper's log: one JSON object per line, as Powertools for AWS Lambda (TypeScript) Logger writes it,
 * because it is that Logger: `level` (INFO, WARN, ERROR), `message`, an RFC 3339 `timestamp`, `service`
 * (POWERTOOLS_SERVICE_NAME, which the template sets), and once the invocation's context is added,
 * `cold_start`, `function_name`, `function_arn`, `function_memory_size`, `function_request_id` (and
 * `xray_trace_id` under X-Ray); then the line's own fields. INFO goes to stdout, WARN and ERROR to stderr.
 * The Logger writes to the streams itself, not through the runtime's console, so a line reaches CloudWatch
 * as it is under Lambda's Text and JSON log formats alike: Logs Insights and metric filters read its fields.
 * The level follows AWS_LAMBDA_LOG_LEVEL (Lambda's applicationLogLevel), else POWERTOOLS_LOG_LEVEL, else INFO.
 *
 * `Log` is the one logging signature of the reaper (the CLI's `echomq sweep` passes its own).
 */
import { Logger } from '@aws-lambda-powertools/logger'

export type LogLevel = 'info' | 'warn' | 'error'
export type Log = (level: LogLevel, message: string, fields?: object) => void

/** `service` when POWERTOOLS_SERVICE_NAME is not set (outside the template: tests, a hand-made function). */
const SERVICE_DEFAULT = 'echomq-reaper'

/**
 * What Lambda passes a handler as its second argument, as far as the reaper reads it: Lambda's own `Context`
 * (@types/aws-lambda) fits it, and so does a test's or a local run's partial one. Declared here, so the
 * package's types need no @types/aws-lambda.
 */
export interface LambdaContext {
  readonly awsRequestId?: string
  readonly functionName?: string
  readonly functionVersion?: string
  readonly invokedFunctionArn?: string
  readonly memoryLimitInMB?: string
  getRemainingTimeInMillis?(): number
}

export interface LambdaLog {
  log: Log
  /** Adds the invocation's request id, cold start and function to every later line. */
  addContext(context: LambdaContext | undefined): void
}

/** A Powertools Logger for the Lambda function, as a `Log`. */
export function lambdaLog(service: string | undefined): LambdaLog {
  const logger = new Logger({ serviceName: service ?? SERVICE_DEFAULT })
  return {
    log: (level, message, fields) =>
      fields === undefined ? logger[level](message) : logger[level](message, fields as Record<string, unknown>),
    addContext(context) {
      if (context?.awsRequestId !== undefined) logger.addContext(context as Parameters<Logger['addContext']>[0])
    },
  }
}
