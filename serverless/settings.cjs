// Checks the parameters at package time: each --param name must be one the template knows, the alarm
// values must be numbers (and an address), and the function's settings are checked by the code that reads
// them at run time (lib/reaper/config.ts, bundled here by esbuild), so a value the function would refuse on
// every invocation (sweepsPerInvocation=99, sweepGraceMs=-5, a bad prefix) stops packaging instead.
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
    entryPoints: [path.join(root, 'lib/reaper/config.ts')],
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

/** Edit distance, for "did you mean". */
function distance(a, b) {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    prev = row
  }
  return prev[b.length]
}

/** A --param the template does not know would be ignored, leaving its default in place: refuse it. */
function checkNames(given, known) {
  for (const entry of given) {
    const name = String(entry).split('=')[0].trim()
    if (known.includes(name)) continue
    const closest = [...known].sort(
      (x, y) => distance(name.toLowerCase(), x.toLowerCase()) - distance(name.toLowerCase(), y.toLowerCase()),
    )[0]
    const hint = closest && distance(name.toLowerCase(), closest.toLowerCase()) <= 3 ? ` (did you mean "${closest}"?)` : ''
    fail(`unknown parameter "${name}"${hint}; the parameters are listed in serverless.yml (params.default)`)
  }
}

/** The alarm parameters go straight into the template: check them here. */
async function checkAlarms(resolveVariable) {
  const threshold = await param(resolveVariable, 'failedJobsThreshold')
  if (!/^\d+$/.test(threshold)) fail(`failedJobsThreshold: expected a whole number of jobs (0 or more), got: ${JSON.stringify(threshold)}`)
  const oldest = await param(resolveVariable, 'oldestWaitAlarmMs')
  if (oldest.toLowerCase() !== 'off' && !/^[1-9]\d*$/.test(oldest))
    fail(`oldestWaitAlarmMs: expected a whole number of ms (1 or more), or off, got: ${JSON.stringify(oldest)}`)
  const email = await param(resolveVariable, 'alarmEmail')
  if (email !== '' && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email))
    fail(`alarmEmail: expected an e-mail address, got: ${JSON.stringify(email)}`)
}

module.exports = async ({ resolveVariable, options }) => {
  const given = [options.param ?? []].flat()
  checkNames(given, Object.keys((await resolveVariable('self:params.default')) ?? {}))
  await checkAlarms(resolveVariable)
  const env = {}
  for (const [name, variable] of Object.entries(SETTINGS)) env[variable] = await param(resolveVariable, name)
  const reaperConfig = loadReaperConfig()
  try {
    // The URL is read at run time (SSM); a placeholder lets every other setting be checked now.
    reaperConfig({}, { ...env, REDIS_URL: 'redis://placeholder:6379' })
  } catch (err) {
    // The error names the variable at fault in a field of its own (EchoMQError.variable): name the --param that sets it.
    const name = Object.keys(SETTINGS).find((p) => SETTINGS[p] === err.variable)
    fail(name ? `--param ${name}: the function's ${err.message}` : String(err.message))
  }
  return { checked: true }
}
