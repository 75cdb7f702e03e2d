// Checks the function's settings at package time with the code that reads them at run time
// (lib/reaper-config.ts, bundled here by esbuild), so a value the function would refuse on every
// invocation (sweepsPerInvocation=99, sweepGraceMs=-5, a bad prefix) stops packaging instead.
// Returns the environment values as checked.
const path = require('node:path')
const { buildSync } = require('esbuild')
const { fail, param } = require('./params.cjs')

// param name -> the environment variable serverless.yml sets from it
const SETTINGS = {
  redisCluster: 'REDIS_CLUSTER',
  queues: 'QUEUES',
  prefix: 'PREFIX',
  metricsNamespace: 'METRICS_NAMESPACE',
  perQueueMetrics: 'PER_QUEUE_METRICS',
  sweepsPerInvocation: 'SWEEPS_PER_INVOCATION',
  sweepIntervalMs: 'SWEEP_INTERVAL_MS',
  sweepGraceMs: 'SWEEP_GRACE_MS',
  sweepLimit: 'SWEEP_LIMIT',
  sweepAudit: 'SWEEP_AUDIT',
}

function loadReaperConfig() {
  const root = path.join(__dirname, '..')
  const { outputFiles } = buildSync({
    entryPoints: [path.join(root, 'lib/reaper-config.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    write: false,
    external: ['ioredis'],
    logLevel: 'silent',
  })
  const mod = { exports: {} }
  new Function('module', 'exports', 'require', outputFiles[0].text)(mod, mod.exports, require)
  return mod.exports.reaperConfig
}

module.exports = async ({ resolveVariable }) => {
  const env = {}
  for (const [name, variable] of Object.entries(SETTINGS)) env[variable] = await param(resolveVariable, name)
  const reaperConfig = loadReaperConfig()
  try {
    // The URL is read at run time (SSM); a placeholder lets every other setting be checked now.
    reaperConfig({}, { ...env, REDIS_URL: 'redis://placeholder:6379' })
  } catch (err) {
    const message = String(err.message)
    const variable = /^([A-Z_]+):/.exec(message)?.[1]
    const name = Object.keys(SETTINGS).find((p) => SETTINGS[p] === variable)
    fail(name ? `${name} (the function's ${message}`.replace(`${variable}:`, `${variable}):`) : message)
  }
  return { checked: true }
}
