/**
 * The dashboard's POSTs: a queue's action (pause, resume, retry-all, clean-*) or a job's (retry, remove,
 * promote). The form must carry the handler's token; a read-only dashboard refuses every POST. Every field
 * is checked before anything is done, so a refused POST changes nothing. The answer is a redirect back to
 * where the form was, with `done` and `n` saying what happened, or a confirmation page.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Queue } from '../queue.js'
import { serverTimeMs } from '../redis/queries.js'
import { JOB_ACTIONS, jobAction, type Outcome, QUEUE_ACTIONS, queueAction } from './actions.js'
import { DashboardError } from './errors.js'
import { oneOf, readForm, redirect, sameSecret, sendHtml } from './http.js'
import { confirmPage, jobPath, queuePath } from './pages.js'
import { LISTED_STATES } from './read.js'
import type { Dashboard } from './screens.js'

type Back = 'overview' | 'queue' | 'job'

interface Form {
  action: string
  confirm: boolean
  back: Back
  state: string | undefined
}

async function readActionForm(d: Dashboard, req: IncomingMessage, id: string | undefined): Promise<Form> {
  if (d.settings.readOnly) throw new DashboardError('ERR_UI_READ_ONLY', 'this dashboard is read-only: it takes no action')
  const form = await readForm(req, ['token', 'action', 'confirm', 'back', 'state'])
  if (form.token === undefined || !sameSecret(form.token, d.token)) {
    throw new DashboardError('ERR_UI_TOKEN', "refused: the request does not carry this page's token (reload the page and try again)")
  }
  if (form.action === undefined) throw new DashboardError('ERR_UI_INPUT', 'form field "action" is missing')
  const back =
    form.back === undefined ? (id === undefined ? 'queue' : 'job') : oneOf('back', form.back, ['overview', 'queue', 'job'] as const)
  const state = form.state === undefined ? undefined : oneOf('state', form.state, LISTED_STATES)
  if (form.confirm !== undefined && form.confirm !== 'yes')
    throw new DashboardError('ERR_UI_INPUT', 'form field "confirm" takes only "yes"')
  return { action: form.action, confirm: form.confirm === 'yes', back, state }
}

export async function post(d: Dashboard, req: IncomingMessage, res: ServerResponse, name: string, id: string | undefined): Promise<void> {
  const form = await readActionForm(d, req, id)
  const queue = await d.set.get(name)
  const done = id === undefined ? await postToQueue(d, res, queue, name, form) : await postToJob(d.settings.basePath, queue, name, id, form)
  if (done === undefined) return
  const { outcome, to } = done
  if ('confirm' in outcome) throw new DashboardError('ERR_UI_INPUT', 'nothing to confirm')
  redirect(res, `${to}${to.includes('?') ? '&' : '?'}done=${outcome.done}${outcome.n > 0 ? `&n=${outcome.n}` : ''}`)
}

interface Done {
  outcome: Outcome
  to: string
}

/** A queue's action; undefined when it answered with a confirmation page instead. */
async function postToQueue(d: Dashboard, res: ServerResponse, queue: Queue, name: string, form: Form): Promise<Done | undefined> {
  const base = d.settings.basePath
  const action = oneOf('action', form.action, QUEUE_ACTIONS)
  const outcome = await queueAction(queue, action, form.confirm)
  let to = form.back === 'overview' ? `${base}/` : `${queuePath(base, name)}${form.state ? `?state=${form.state}` : ''}`
  if ('confirm' in outcome) {
    const cancel =
      form.back === 'overview' ? `${base}/` : `${queuePath(base, name)}?state=${action === 'clean-completed' ? 'completed' : 'failed'}`
    const crumbs = [{ label: name, href: queuePath(base, name) }, { label: 'confirm' }]
    const page = confirmPage(
      d.view(),
      await serverTimeMs(d.set.client),
      { path: queuePath(base, name), action, back: cancel, crumbs },
      outcome.confirm.question,
      outcome.confirm.button,
    )
    sendHtml(res, 200, page)
    return undefined
  }
  if (action === 'retry-all' || action === 'clean-failed') to = `${queuePath(base, name)}?state=failed`
  if (action === 'clean-completed') to = `${queuePath(base, name)}?state=completed`
  return { outcome, to }
}

async function postToJob(base: string, queue: Queue, name: string, id: string, form: Form): Promise<Done> {
  const action = oneOf('action', form.action, JOB_ACTIONS)
  const outcome = await jobAction(queue, id, action)
  const to =
    form.back === 'job' && action !== 'remove'
      ? jobPath(base, name, id)
      : `${queuePath(base, name)}${form.state ? `?state=${form.state}` : ''}`
  return { outcome, to }
}
