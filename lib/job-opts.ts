/**
 * `job.opts`: re-exported from the job hash's codec (lib/redis/job-codec.ts), where it is read, and the
 * options (lib/job-options.ts), where its type lives, for the modules that import it from here.
 */
export type { JobOpts } from './job-options.js'
export { jobOpts, type OptionField } from './redis/job-codec.js'
