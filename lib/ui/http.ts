/**
 * HTTP for the dashboard on plain node:http: the headers every answer carries (a Content-Security-Policy
 * that allows no inline script, nosniff, no framing, no caching of pages), HTTP Basic with a constant-time
 * comparison, the Host check against DNS rebinding, the page token's check, and strict reading of query
 * parameters and form bodies (unknown names, repeated names, bad values and large bodies are refused).
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { DashboardError } from './errors.js'
import type { DashboardAuth } from './options.js'

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

export function securityHeaders(res: ServerResponse): void {
  res.setHeader('Content-Security-Policy', CSP)
  res.setHeader('X-Content-Type-Options', 'nosniff')
  res.setHeader('X-Frame-Options', 'DENY')
  res.setHeader('Referrer-Policy', 'no-referrer')
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin')
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin')
}

export function send(res: ServerResponse, status: number, type: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.statusCode = status
  res.setHeader('Content-Type', type)
  if (!res.hasHeader('Cache-Control')) res.setHeader('Cache-Control', 'no-store')
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v)
  res.end(body)
}

export const sendHtml = (res: ServerResponse, status: number, body: string) => send(res, status, 'text/html; charset=utf-8', body)
export const sendJson = (res: ServerResponse, status: number, body: unknown) =>
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(body))

export function redirect(res: ServerResponse, location: string): void {
  res.statusCode = 303
  res.setHeader('Location', location)
  res.setHeader('Cache-Control', 'no-store')
  res.end()
}

/** Equal in constant time (whatever the lengths: both sides hashed first). */
export function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(expected).digest()
  return timingSafeEqual(a, b)
}

/** HTTP Basic: the request's credentials match, else ERR_UI_AUTH (401 with a challenge). */
export function checkAuth(req: IncomingMessage, auth: DashboardAuth): void {
  const header = req.headers.authorization ?? ''
  const m = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header.trim())
  const given = m?.[1] ? Buffer.from(m[1], 'base64').toString('utf8') : ''
  if (!sameSecret(given, `${auth.username}:${auth.password}`))
    throw new DashboardError('ERR_UI_AUTH', 'this dashboard needs a user name and password')
}

/** The Host header is one of `allowed` (a page served on loopback must not answer a rebound domain). */
export function checkHost(req: IncomingMessage, allowed: string[]): void {
  const host = (req.headers.host ?? '').toLowerCase()
  if (!allowed.includes(host))
    throw new DashboardError('ERR_UI_HOST', `requests for host "${host}" are not served here; open ${allowed[0] ?? ''}`)
}

export const acceptsJson = (req: IncomingMessage) => /\bapplication\/json\b/.test(req.headers.accept ?? '')

/** Query parameters, each at most once and among `allowed`. */
export function params(search: URLSearchParams, allowed: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of search) {
    if (!allowed.includes(k))
      throw new DashboardError('ERR_UI_INPUT', `unknown query parameter "${k}"; this page takes ${allowed.join(', ') || 'none'}`)
    if (k in out) throw new DashboardError('ERR_UI_INPUT', `query parameter "${k}" given more than once`)
    out[k] = v
  }
  return out
}

/** A page number (1 when absent), 1 to `max`. */
export function pageNumber(name: string, raw: string | undefined, max = 1_000_000_000): number {
  if (raw === undefined) return 1
  if (!/^[1-9]\d{0,9}$/.test(raw) || Number(raw) > max)
    throw new DashboardError(
      'ERR_UI_INPUT',
      `expected ${name} to be a page number from 1 to ${max}, got: ${JSON.stringify(raw.slice(0, 40))}`,
    )
  return Number(raw)
}

/** `raw` if it is one of `allowed`. */
export function oneOf<T extends string>(name: string, raw: string, allowed: readonly T[]): T {
  const found = allowed.find((a) => a === raw)
  if (found === undefined)
    throw new DashboardError(
      'ERR_UI_INPUT',
      `expected ${name} to be one of ${allowed.join(', ')}, got: ${JSON.stringify(raw.slice(0, 40))}`,
    )
  return found
}

const MAX_BODY_BYTES = 8 * 1024

/**
 * A form body (application/x-www-form-urlencoded), each field at most once and among `allowed`. A body
 * a framework already parsed (Express's `req.body`, a Fastify route's body set on the raw request) is used
 * as it is.
 */
export async function readForm(req: IncomingMessage, allowed: readonly string[]): Promise<Record<string, string>> {
  const parsed = (req as { body?: unknown }).body
  let fields: [string, string][]
  if (parsed !== null && typeof parsed === 'object' && !Buffer.isBuffer(parsed)) {
    fields = Object.entries(parsed).map(([k, v]) => {
      if (typeof v !== 'string') throw new DashboardError('ERR_UI_INPUT', `form field "${k}" must be text`)
      return [k, v]
    })
  } else {
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase()
    if (type !== 'application/x-www-form-urlencoded')
      throw new DashboardError(
        'ERR_UI_MEDIA_TYPE',
        `expected a form (application/x-www-form-urlencoded), got: ${JSON.stringify(type ?? '')}`,
      )
    fields = [...new URLSearchParams(await readBody(req))]
  }
  const out: Record<string, string> = {}
  for (const [k, v] of fields) {
    if (!allowed.includes(k)) throw new DashboardError('ERR_UI_INPUT', `unknown form field "${k.slice(0, 40)}"`)
    if (k in out) throw new DashboardError('ERR_UI_INPUT', `form field "${k}" given more than once`)
    out[k] = v
  }
  return out
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_BODY_BYTES) throw new DashboardError('ERR_UI_TOO_LARGE', `a form of at most ${MAX_BODY_BYTES} bytes is expected`)
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks).toString('utf8')
}
