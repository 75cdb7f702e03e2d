// METRICS_MODE for the function: the metricsMode parameter when given; else `emf` in a VPC, where a
// PutMetricData call may have no route (EMF lines go out with the logs); else unset, so the code's default
// applies: api in Lambda, off under `serverless invoke local` (IS_LOCAL=true).
const { fail, param } = require('./params.cjs')
const { vpc } = require('./vpc.cjs')

const MODES = ['api', 'emf', 'off']

module.exports = async ({ resolveVariable }) => {
  const mode = (await param(resolveVariable, 'metricsMode')).toLowerCase()
  if (mode !== '') {
    if (!MODES.includes(mode)) fail(`metricsMode: expected one of ${MODES.join(', ')}, got: ${JSON.stringify(mode)}`)
    return mode
  }
  return (await vpc(resolveVariable)) ? 'emf' : null
}
