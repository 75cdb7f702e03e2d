/**
 * The scheduled reaper's Lambda entry, kept thin: the handler of lib/reaper/handler.ts (a Powertools Logger
 * with the invocation's context, then the container's reaper, lib/reaper/lambda.ts), made once per
 * container from the function's environment. It imports the handler directly rather than through the
 * package's lazy `echomq/reaper` entry, so the bundle loads the AWS SDK during the init phase.
 */
import { createHandler } from '../lib/reaper/handler.js'

export type { ReaperSummary } from '../lib/reaper/reaper.js'
export { createHandler }

export const handler = createHandler()
