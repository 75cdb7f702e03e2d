/**
 * One invocation of the Lambda handler in a process of its own (the environment is its configuration), for
 * tests that kill an invocation midway: `node --import tsx test/helpers/reaper-invocation-process.ts`.
 */
import { createHandler } from '../../functions/sweep.js'

const handler = createHandler(process.env)
await handler({ source: 'aws.events' }, { getRemainingTimeInMillis: () => 50_000 }).finally(() => handler.close())
