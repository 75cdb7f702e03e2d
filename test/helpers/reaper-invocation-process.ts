/**
 * One invocation of the Lambda handler in a process of its own (the environment is its configuration), for
 * tests that kill an invocation midway: `node --import tsx test/helpers/reaper-invocation-process.ts`.
 * TEST_REMAINING_MS: the time the invocation has left when it starts, as Lambda's context says (50,000).
 */
import { createHandler } from '../../functions/sweep.js'

const deadline = performance.now() + Number(process.env.TEST_REMAINING_MS ?? 50_000)
const handler = createHandler(process.env)
await handler({ source: 'aws.events' }, { getRemainingTimeInMillis: () => Math.max(0, deadline - performance.now()) }).finally(() =>
  handler.close(),
)
