/**
 * The dashboard's actions, each one call of the library's Queue (no second implementation): pause and
 * resume, retry one or all failed jobs, remove a job, promote a delayed job, remove every completed or
 * failed job (clean). An action that affects more than one job asks first: it answers `confirm` until the
 * form comes back with confirm=yes. What happened goes back to the page as a code and a count (never as
 * text from the request), shown as a notice after the redirect.
 */
import type { Queue } from '../queue.js'
import { DashboardError } from './errors.js'
import { count } from './format.js'

export const QUEUE_ACTIONS = ['pause', 'resume', 'retry-all', 'clean-completed', 'clean-failed'] as const
export const JOB_ACTIONS = ['retry', 'remove', 'promote'] as const
export type QueueAction = (typeof QUEUE_ACTIONS)[number]
export type JobAction = (typeof JOB_ACTIONS)[number]

export const DONE_CODES = ['paused', 'resumed', 'retried', 'removed', 'promoted', 'cleaned'] as const
export type DoneCode = (typeof DONE_CODES)[number]

export type Outcome = { done: DoneCode; n: number } | { confirm: { question: string; button: string } }

const plural = (n: number, what: string) => `${count(n)} ${what}${n === 1 ? '' : 's'}`

export async function queueAction(queue: Queue, action: QueueAction, confirmed: boolean): Promise<Outcome> {
  switch (action) {
    case 'pause':
      await queue.pause()
      return { done: 'paused', n: 0 }
    case 'resume':
      await queue.resume()
      return { done: 'resumed', n: 0 }
    case 'retry-all': {
      const n = (await queue.counts()).failed
      if (n > 1 && !confirmed) {
        return {
          confirm: {
            question: `Retry all ${plural(n, 'failed job')} of queue ${queue.name}? Each goes back to wait with a fresh attempts budget.`,
            button: `Retry ${plural(n, 'job')}`,
          },
        }
      }
      // The operator's retry: a fresh attempts budget (docs/dashboard.md).
      return { done: 'retried', n: (await queue.retryJobs({ resetAttemptsMade: true })).length }
    }
    case 'clean-completed':
    case 'clean-failed': {
      const type = action === 'clean-completed' ? 'completed' : 'failed'
      const n = (await queue.counts())[type]
      if (n > 1 && !confirmed) {
        return {
          confirm: {
            question: `Remove all ${plural(n, `${type} job`)} of queue ${queue.name}, with their logs? This cannot be undone.`,
            button: `Remove ${plural(n, 'job')}`,
          },
        }
      }
      return { done: 'cleaned', n: (await queue.clean(0, 0, type)).length }
    }
  }
}

export async function jobAction(queue: Queue, id: string, action: JobAction): Promise<Outcome> {
  switch (action) {
    case 'retry':
      return { done: 'retried', n: (await queue.retryJobs({ ids: [id], resetAttemptsMade: true })).length }
    case 'remove':
      if (!(await queue.removeJob(id))) throw new DashboardError('ERR_UI_NOT_FOUND', `no job "${id}" in queue "${queue.name}"`)
      return { done: 'removed', n: 1 }
    case 'promote':
      await queue.promoteJob(id)
      return { done: 'promoted', n: 1 }
  }
}

/** The notice for a done code and its count. */
export function notice(done: DoneCode, n: number): string {
  switch (done) {
    case 'paused':
      return 'Queue paused: no worker takes a job until it is resumed (running jobs finish).'
    case 'resumed':
      return 'Queue resumed: workers take jobs again.'
    case 'retried':
      return n === 0 ? 'No failed job to retry.' : `Retried ${plural(n, 'job')}: back in wait.`
    case 'removed':
      return 'Job removed.'
    case 'promoted':
      return 'Job promoted: it is at the back of wait.'
    case 'cleaned':
      return `Removed ${plural(n, 'job')}.`
  }
}
