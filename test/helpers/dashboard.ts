/**
 * The dashboard in tests: served on a free port (serveDashboard), with small helpers to read a page, find
 * its token and post a form as a browser would. useDashboards serves them on the test's Redis and closes
 * them after each test.
 */
import { afterEach } from 'vitest'
import { type ServedDashboard, type ServeOptions, serveDashboard } from '../../lib/ui/index.js'
import type { TestRedis } from './redis-server.js'

export interface TestDashboard {
  served: ServedDashboard
  url: string
  get(path: string, headers?: Record<string, string>): Promise<{ status: number; text: string; headers: Headers }>
  post(path: string, form: Record<string, string>, headers?: Record<string, string>): Promise<Response>
  /** The token written into a page's forms. */
  token(): Promise<string>
}

export async function startDashboard(options: ServeOptions): Promise<TestDashboard> {
  const served = await serveDashboard({ port: 0, refreshMs: 0, ...options })
  const url = served.url
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(url + path.replace(/^\//, ''), { headers, redirect: 'manual' })
    return { status: res.status, text: await res.text(), headers: res.headers }
  }
  return {
    served,
    url,
    get,
    post: (path, form, headers = {}) =>
      fetch(url + path.replace(/^\//, ''), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(form).toString(),
        redirect: 'manual',
      }),
    async token() {
      const page = await get('/')
      const token = /name="token" value="([^"]+)"/.exec(page.text)?.[1]
      if (!token) throw new Error('no token in the overview (read-only, or no queue?)')
      return token
    },
  }
}

/** Dashboards on the test Redis (its URL, unless `options` name another connection), closed after each test. */
export function useDashboards(redis: TestRedis): (options?: Partial<ServeOptions>) => Promise<TestDashboard> {
  const served: TestDashboard[] = []
  afterEach(async () => {
    await Promise.all(served.splice(0).map((d) => d.served.close()))
  })
  return async (options = {}) => {
    const d = await startDashboard({ connection: redis.url, ...options })
    served.push(d)
    return d
  }
}
