/**
 * The dashboard's options, validated in one place (unknown names rejected with the closest known one),
 * with their defaults stated once:
 *
 *   connection    an ioredis client (used as is, never closed) or a URL (redis://, rediss://, with user:password@,
 *                 redis+cluster://); default REDIS_URL, then redis://127.0.0.1:6379
 *   prefix        key prefix ('emq')
 *   basePath      where the handler is mounted ('' : the root; '/admin/queues' under an existing app)
 *   queues        the queues shown and acted on (default: every queue in the registry)
 *   readOnly      no action at all: none shown, every POST refused (false)
 *   auth          'user:password' or { username, password }: HTTP Basic on every request (none)
 *   allowedHosts  Host header values accepted, e.g. ['127.0.0.1:3000'] (default: any); serveDashboard sets
 *                 the loopback names when it binds to loopback without auth, against DNS rebinding
 *   graceMs       the sweep's grace, to say when a marked job will be recovered (SWEEP_GRACE_MS_DEFAULT, 15000)
 *   refreshMs     how often an open page refreshes its figures (5000 ms; 0: never)
 *   pageSize      jobs per page (50, at most 500)
 */
import { PREFIX_DEFAULT, SWEEP_GRACE_MS_DEFAULT, validatePrefix, validateQueueName } from '../options.js'
import { checkInteger, checkKnown, describe, fail, opt, RANGES } from '../validate.js'

export interface DashboardAuth {
  username: string
  password: string
}

export interface DashboardOptions {
  connection?: unknown
  prefix?: string
  basePath?: string
  queues?: string[]
  readOnly?: boolean
  auth?: string | DashboardAuth
  allowedHosts?: string[]
  graceMs?: number
  refreshMs?: number
  pageSize?: number
}

export interface DashboardSettings {
  connection: unknown
  prefix: string
  basePath: string
  queues: string[] | undefined
  readOnly: boolean
  auth: DashboardAuth | undefined
  allowedHosts: string[] | undefined
  graceMs: number
  refreshMs: number
  pageSize: number
}

const REFRESH_MS_DEFAULT = 5_000
const PAGE_SIZE_DEFAULT = 50
const PAGE_SIZE_MAX = 500

const NAMES = ['connection', 'prefix', 'basePath', 'queues', 'readOnly', 'auth', 'allowedHosts', 'graceMs', 'refreshMs', 'pageSize']

const BASE_PATH = /^(\/[A-Za-z0-9._~-]+)*$/

/** 'user:password' (the password may hold ':') or { username, password }, both non-empty. */
export function parseAuth(value: unknown): DashboardAuth {
  if (typeof value === 'string') {
    const colon = value.indexOf(':')
    if (colon > 0 && colon < value.length - 1) return { username: value.slice(0, colon), password: value.slice(colon + 1) }
    fail('ERR_OPTIONS', 'expected auth to be "user:password" with both parts non-empty (the value is not shown)')
  }
  const o = checkKnown('auth', value, ['username', 'password'])
  if (
    typeof o.username !== 'string' ||
    o.username === '' ||
    o.username.includes(':') ||
    typeof o.password !== 'string' ||
    o.password === ''
  ) {
    fail('ERR_OPTIONS', 'expected auth to be { username, password }: non-empty strings, the username without ":"')
  }
  return { username: o.username, password: o.password }
}

function stringList(name: string, value: unknown): string[] {
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v === '')) {
    fail('ERR_OPTIONS', `expected ${name} to be a list of non-empty strings, got: ${describe(value)}`)
  }
  return value as string[]
}

export function dashboardSettings(options: unknown): DashboardSettings {
  const o = checkKnown('dashboard', options, NAMES)
  const basePath = opt(o.basePath, '', (v) => {
    const path = typeof v === 'string' ? v.replace(/\/$/, '') : v
    if (typeof path !== 'string' || !BASE_PATH.test(path))
      fail('ERR_OPTIONS', `expected basePath to be a path such as /admin/queues (letters, digits, . _ ~ -), got: ${describe(v)}`)
    return path
  })
  const flag = (name: string) => (v: unknown) => {
    if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected ${name} to be true or false, got: ${describe(v)}`)
    return v
  }
  return {
    connection: o.connection,
    prefix: validatePrefix(o.prefix ?? PREFIX_DEFAULT),
    basePath,
    queues: opt(o.queues, undefined, (v) => [...new Set(stringList('queues', v).map((q) => validateQueueName(q)))]),
    readOnly: opt(o.readOnly, false, flag('readOnly')),
    auth: opt(o.auth, undefined, parseAuth),
    allowedHosts: opt(o.allowedHosts, undefined, (v) => stringList('allowedHosts', v).map((h) => h.toLowerCase())),
    graceMs: opt(o.graceMs, SWEEP_GRACE_MS_DEFAULT, (v) => checkInteger('graceMs', v, RANGES.graceMs)),
    refreshMs: opt(o.refreshMs, REFRESH_MS_DEFAULT, (v) => checkInteger('refreshMs', v, { min: 0, max: 3_600_000, unit: 'ms' })),
    pageSize: opt(o.pageSize, PAGE_SIZE_DEFAULT, (v) => checkInteger('pageSize', v, { min: 1, max: PAGE_SIZE_MAX })),
  }
}
