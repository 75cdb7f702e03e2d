/**
 * The `echomq` command: finds the command a user named and runs it, prints the help, and turns what went
 * wrong into a message and an exit code: 0 success, 1 failure (Redis unreachable, no such queue or job, a
 * job in the wrong state), 2 bad usage or input.
 *
 * The parts: commands/ holds one module per command (its flags, typed, and its help; it calls the work and
 * prints); reports/ reads and renders what stats, inspect and jobs show; scenes/ stages the demo and the
 * race; command.ts parses flags, input.ts checks their values, redis.ts finds the Redis (the reaper's rule,
 * lib/redis/url.ts); support/ holds the helpers the demo, the tests and the benchmarks share (a private
 * redis-server, crashed state, worker processes).
 */
import { EchoMQError } from '../lib/errors.js'
import { COMMON_HELP, type Command } from './command.js'
import { demo } from './commands/demo.js'
import { inspect } from './commands/inspect.js'
import { jobs } from './commands/jobs.js'
import { pause, resume } from './commands/pause.js'
import { race } from './commands/race.js'
import { remove } from './commands/remove.js'
import { retry } from './commands/retry.js'
import { schedulers } from './commands/schedulers.js'
import { stats } from './commands/stats.js'
import { sweep } from './commands/sweep.js'
import { ui } from './commands/ui.js'
import { CliError, messageOf } from './errors.js'
import { out } from './format.js'

const commands: Record<string, Command> = { demo, race, sweep, stats, inspect, jobs, retry, remove, pause, resume, schedulers, ui }

/** Library errors that mean the input was wrong (exit 2), not that something failed. */
const INPUT_ERRORS = ['ERR_QUEUE_NAME', 'ERR_JOB_ID', 'ERR_OPTIONS', 'ERR_CONFIG']

function mainHelp(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length))
  return `echomq: stalled-job recovery for Redis job queues

Usage: echomq <command> [options]

Commands:
${Object.entries(commands)
  .map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`)
  .join('\n')}

Run "echomq <command> --help" for a command's options.`
}

/** Options may come before the command (`echomq --redis-url URL stats`): the command is the first word that names one. */
function commandFirst(argv: string[]): string[] {
  if (!argv[0]?.startsWith('-') || ['--help', '-h'].includes(argv[0])) return argv
  const at = argv.findIndex((arg) => Object.hasOwn(commands, arg))
  const name = argv[at]
  return name === undefined ? [] : [name, ...argv.slice(0, at), ...argv.slice(at + 1)]
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = commandFirst(argv)
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    if (name === undefined && argv.length > 0) process.stderr.write('echomq: no command given\n\n')
    out(mainHelp())
    return name === undefined ? 2 : 0
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined
  if (!command) {
    process.stderr.write(`echomq: unknown command "${name}"\n\n${mainHelp()}\n`)
    return 2
  }
  try {
    const parsed = command.parse(rest)
    if (parsed.help) {
      out(`Usage: ${command.usage}\n\nCommon options:\n${COMMON_HELP}`)
      return 0
    }
    await parsed.run()
    return typeof process.exitCode === 'number' ? process.exitCode : 0
  } catch (err) {
    const usage = (err instanceof CliError && err.usage) || (err instanceof EchoMQError && INPUT_ERRORS.includes(err.code))
    process.stderr.write(`echomq ${name}: ${messageOf(err)}\n${usage ? `Run "echomq ${name} --help" for usage.\n` : ''}`)
    return usage ? 2 : 1
  }
}
