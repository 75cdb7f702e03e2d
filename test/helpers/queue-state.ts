/** Queue states for tests: the one builder in cli/support/crashed-state.ts, under the names the tests use. */
export { addJobs, buildCrashedState as crashedJobs, holdJobs } from '../../cli/support/crashed-state.js'
