// The worker function the reaper starts when jobs wait (functions/work.ts, echomq/lambda): WORKER_FUNCTIONS
// for the reaper's environment and the one statement that lets its role invoke that function, both only
// when the workerQueue parameter names a queue. The value is checked now by the code that reads it at run
// time (lib/reaper/worker-functions.ts, bundled here by esbuild), so a bad one stops packaging.
const path = require('node:path')
const { buildSync } = require('esbuild')
const { fail, param } = require('./params.cjs')

function loadParser() {
  const root = path.join(__dirname, '..')
  const { outputFiles } = buildSync({
    entryPoints: [path.join(root, 'lib/reaper/worker-functions.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    write: false,
    logLevel: 'silent',
  })
  const mod = { exports: {} }
  new Function('module', 'exports', 'require', outputFiles[0].text)(mod, mod.exports, require)
  return mod.exports.parseWorkerFunctions
}

/** { queue: { function, maxConcurrency, jobsPerInvocation } }, or null when workerQueue is empty. */
async function workerFunctions(resolveVariable) {
  const queue = await param(resolveVariable, 'workerQueue')
  if (queue === '') return null
  const name = await resolveVariable('self:custom.workFunctionName')
  const int = async (p) => {
    const v = await param(resolveVariable, p)
    if (!/^\d+$/.test(v)) fail(`${p}: expected a whole number, got: ${JSON.stringify(v)}`)
    return Number(v)
  }
  const value = {
    [queue]: { function: name, maxConcurrency: await int('workerMaxConcurrency'), jobsPerInvocation: await int('workerJobsPerInvocation') },
  }
  try {
    return loadParser()(value, 'workerQueue')
  } catch (err) {
    fail(`--param workerQueue/workerMaxConcurrency/workerJobsPerInvocation: ${err.message}`)
  }
}

module.exports = {
  /** WORKER_FUNCTIONS (JSON), or null: the variable is left out. */
  async env({ resolveVariable }) {
    const value = await workerFunctions(resolveVariable)
    return value === null ? null : JSON.stringify(value)
  },
  /** The statement letting the reaper invoke the worker function, by exact ARN; [] without one. */
  async statements({ resolveVariable }) {
    const value = await workerFunctions(resolveVariable)
    if (value === null) return []
    const names = Object.values(value).map((f) => f.function)
    return [
      {
        Effect: 'Allow',
        Action: 'lambda:InvokeFunction',
        Resource: names.map((n) => ({ 'Fn::Sub': `arn:\${AWS::Partition}:lambda:\${AWS::Region}:\${AWS::AccountId}:function:${n}` })),
      },
    ]
  },
}
