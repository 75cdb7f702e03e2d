/**
 * The dashboard: createDashboard (a request handler to mount under a base path) and serveDashboard (its
 * own server, what `echomq ui` runs). See handler.ts for the routes and guarantees, options.ts for the
 * options, server.ts for the rules on hosts and auth.
 */
export { createDashboard, type DashboardHandler } from './handler.js'
export type { DashboardAuth, DashboardOptions } from './options.js'
export { isLoopback, type ServedDashboard, type ServeOptions, serveDashboard, UI_HOST_DEFAULT, UI_PORT_DEFAULT } from './server.js'
