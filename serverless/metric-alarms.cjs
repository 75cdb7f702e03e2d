// The alarms on the reaper's own metrics (custom.metricAlarms and custom.oldestWaitAlarm in serverless.yml),
// decided at package time: none with metricsMode=off (packaging says so, and what still watches the reaper),
// the oldest-wait (backlog) alarm unless oldestWaitAlarmMs=off. No CloudFormation Condition: a resource left
// out is simply not in the template.
const { param, warn } = require('./params.cjs')
const metricsMode = require('./metrics-mode.cjs')

module.exports = async ({ resolveVariable }) => {
  if ((await metricsMode({ resolveVariable })) === 'off') {
    warn(
      "metricsMode=off: the alarms on the reaper's metrics (jobs-failed, sweep-errors, no-queues-swept, metrics-not-published, " +
        "oldest-wait) are not created; function-errors, function-timeouts and sweeper-not-invoked, on the function's own " +
        'metrics and log lines, still watch it.',
    )
    return { metricAlarms: null, oldestWait: null }
  }
  const oldest = await param(resolveVariable, 'oldestWaitAlarmMs')
  return {
    metricAlarms: await resolveVariable('self:custom.metricAlarms'),
    oldestWait: oldest.toLowerCase() === 'off' ? null : await resolveVariable('self:custom.oldestWaitAlarm'),
  }
}
