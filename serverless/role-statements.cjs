// The function role's statements (custom.roleStatements in serverless.yml), less cloudwatch:PutMetricData for a
// stage that does not publish with it: metricsMode emf (the default in a VPC) writes its metrics into the log,
// and off writes none. Unset outside a VPC means the code's default, api, so the grant stays.
// With a worker function (workerQueue), the reaper may invoke it (serverless/worker-functions.cjs), that one only.
const metricsMode = require('./metrics-mode.cjs')
const workerFunctions = require('./worker-functions.cjs')

const PUT_METRIC_DATA = 'cloudwatch:PutMetricData'

module.exports = async ({ resolveVariable }) => {
  const statements = [...(await resolveVariable('self:custom.roleStatements')), ...(await workerFunctions.statements({ resolveVariable }))]
  const mode = await metricsMode({ resolveVariable })
  if (mode === null || mode === 'api') return statements
  return statements.filter((s) => ![s.Action].flat().includes(PUT_METRIC_DATA))
}
