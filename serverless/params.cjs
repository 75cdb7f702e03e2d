// Shared by the resolvers in this folder. Each serverless/*.cjs is a ${file(...)} variable source of
// serverless.yml: it reads the --param values (or params.<stage>) and returns what the template needs.

/** A parameter's value, trimmed; '' when unset. */
async function param(resolveVariable, name) {
  return String((await resolveVariable(`param:${name}, ''`)) ?? '').trim()
}

/** A comma-list parameter. */
async function list(resolveVariable, name) {
  return (await param(resolveVariable, name))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
}

/** Stops packaging with this message and no stack trace: the input is wrong, not the code. */
function fail(message) {
  const err = new Error(message)
  err.stack = message
  throw err
}

/** A warning in the command's output (package, deploy), once per process. */
const warned = new Set()
function warn(message) {
  if (warned.has(message)) return
  warned.add(message)
  process.stderr.write(`\nWarning: ${message}\n\n`)
}

module.exports = { param, list, fail, warn }
