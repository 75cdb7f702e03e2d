// reservedConcurrency: none unless the parameter sets it. Reserving concurrency fails stack creation on an
// account at the default quota of 10 (AWS keeps 10 unreserved), and overlapping sweeps are safe anyway.
const { fail, param } = require('./params.cjs')

module.exports = async ({ resolveVariable }) => {
  const raw = await param(resolveVariable, 'reservedConcurrency')
  if (raw === '') return null
  if (!/^\d+$/.test(raw)) fail(`reservedConcurrency: expected a whole number (0 stops the schedule), got: ${JSON.stringify(raw)}`)
  return Number(raw)
}
