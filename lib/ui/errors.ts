/**
 * What the dashboard answers when a request cannot be served: a status and a stable code, shown on the
 * error page (or as `{ error: { code, message } }` to a request that accepts JSON). Bad input (a query
 * parameter, a form value, a queue name, a job id) is a 4xx raised before any action, so nothing changes;
 * the library's own errors keep their codes (ERR_JOB_ID, ERR_JOB_STATE, ...) with a status that fits.
 */
import { EchoMQError } from '../errors.js'

export type DashboardErrorCode =
  | 'ERR_UI_INPUT'
  | 'ERR_UI_NOT_FOUND'
  | 'ERR_UI_AUTH'
  | 'ERR_UI_HOST'
  | 'ERR_UI_TOKEN'
  | 'ERR_UI_READ_ONLY'
  | 'ERR_UI_METHOD'
  | 'ERR_UI_MEDIA_TYPE'
  | 'ERR_UI_TOO_LARGE'
  | 'ERR_UI_CLOSED'

const STATUS: Record<DashboardErrorCode, number> = {
  ERR_UI_INPUT: 400,
  ERR_UI_AUTH: 401,
  ERR_UI_HOST: 403,
  ERR_UI_TOKEN: 403,
  ERR_UI_READ_ONLY: 403,
  ERR_UI_NOT_FOUND: 404,
  ERR_UI_METHOD: 405,
  ERR_UI_TOO_LARGE: 413,
  ERR_UI_MEDIA_TYPE: 415,
  ERR_UI_CLOSED: 503,
}

export class DashboardError extends Error {
  readonly status: number
  constructor(
    readonly code: DashboardErrorCode,
    message: string,
  ) {
    super(message)
    this.name = 'DashboardError'
    this.status = STATUS[code]
  }
}

/** The library's codes by what they mean to a client. */
const LIBRARY_STATUS: Record<string, number> = {
  ERR_QUEUE_NAME: 400,
  ERR_JOB_ID: 400,
  ERR_OPTIONS: 400,
  ERR_JOB_MISSING: 404,
  ERR_JOB_STATE: 409,
  ERR_JOB_ACTIVE: 409,
  ERR_QUEUE_ACTIVE: 409,
  ERR_CONNECTION: 503,
  ERR_CLOSED: 503,
  ERR_OOM: 507,
}

/** The status, code and message a failure is answered with. */
export function describeFailure(err: unknown): { status: number; code: string; message: string } {
  if (err instanceof DashboardError) return { status: err.status, code: err.code, message: err.message }
  if (err instanceof EchoMQError) return { status: LIBRARY_STATUS[err.code] ?? 500, code: err.code, message: err.message }
  return { status: 500, code: 'ERR_UI_INTERNAL', message: err instanceof Error ? err.message : String(err) }
}
