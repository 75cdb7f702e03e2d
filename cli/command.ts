/**
 * What a command is, and its flags parsed with types: each command declares its options once, as data, and
 * the types of what it reads follow from that declaration (node:util's parseArgs types, kept precise by a
 * `const` type parameter), so a command's body needs no casts and a misspelt flag does not compile.
 * Parsing is strict: an unknown flag or a missing value is a usage error (exit 2).
 */
import { parseArgs } from 'node:util'
import { PREFIX_DEFAULT } from '../lib/options.js'
import { CliError, messageOf } from './errors.js'

/** One flag, as parseArgs takes it. */
interface OptionSpec {
  type: 'string' | 'boolean'
  multiple?: boolean
  short?: string
  default?: string | boolean | string[] | boolean[]
}
type OptionSpecs = Record<string, OptionSpec>

/** The flags every command takes, after its name or before it (`echomq --redis-url URL stats`). */
const COMMON = {
  'redis-url': { type: 'string' },
  prefix: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} satisfies OptionSpecs

export const COMMON_HELP = `  --redis-url <url>   Redis to use (default: REDIS_URL, then SSM parameter REDIS_URL_PARAMETER, then the local default)
  --prefix <prefix>   key prefix (default: ${PREFIX_DEFAULT})
  --json              print JSON instead of tables
  -h, --help          show this help`

type ParseConfig<O extends OptionSpecs> = { args: string[]; options: typeof COMMON & O; allowPositionals: true; strict: true }

/** The parsed flags of a command declaring `O`: strings, booleans, lists; those without a default may be undefined. */
export type Values<O extends OptionSpecs> = ReturnType<typeof parseArgs<ParseConfig<O>>>['values']

export interface CommandSpec<O extends OptionSpecs> {
  /** One line for `echomq --help`. */
  summary: string
  /** The text of `echomq <command> --help`, from its synopsis on. */
  usage: string
  options: O
  /** How many positional arguments it takes (default none); more is a usage error. */
  positionals?: number
  run(values: Values<O>, positionals: string[]): Promise<void>
}

/** A command as the dispatcher sees it: its help, and its arguments parsed into a run (or into a request for help). */
export interface Command {
  summary: string
  usage: string
  parse(args: string[]): { help: true } | { help: false; run(): Promise<void> }
}

/**
 * `--grace -5`: parseArgs takes "-5" for a flag and calls the option ambiguous; joined to its option
 * (`--grace=-5`), the value reaches the command's own check, which says what it expects.
 */
function joinNegativeValues(args: string[], options: OptionSpecs): string[] {
  const out: string[] = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string
    const next = args[i + 1]
    if (arg === '--') return [...out, ...args.slice(i)]
    if (arg.startsWith('--') && options[arg.slice(2)]?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`)
      i++
    } else out.push(arg)
  }
  return out
}

/** Parses with COMMON and the command's own options; a parse error is a usage error. */
function parse<O extends OptionSpecs>(args: string[], options: O): ReturnType<typeof parseArgs<ParseConfig<O>>> {
  const all = { ...COMMON, ...options }
  try {
    return parseArgs({ args: joinNegativeValues(args, all), options: all, allowPositionals: true, strict: true })
  } catch (err) {
    throw new CliError(messageOf(err), true)
  }
}

export function command<const O extends OptionSpecs>(spec: CommandSpec<O>): Command {
  return {
    summary: spec.summary,
    usage: spec.usage,
    parse(args) {
      const { values, positionals } = parse(args, spec.options)
      // `help` is one of COMMON's flags; the generic type of `values` does not show it until O is known.
      if ('help' in values && values.help === true) return { help: true }
      const allowed = spec.positionals ?? 0
      if (positionals.length > allowed) throw new CliError(`unexpected argument: ${positionals[allowed]}`, true)
      return { help: false, run: () => spec.run(values, positionals) }
    },
  }
}
