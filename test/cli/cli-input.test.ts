/**
 * What the commands take in, in process: their typed flag parsing (cli/command.ts: the types of a command's
 * values follow from its options declaration, COMMON's flags come with every command, and what is not a
 * valid call is a usage error before the command's body runs), and where their Redis URL comes from
 * (cli/redis.ts, the reaper's order). test/cli/cli.test.ts runs the same through real processes and SSM.
 */
import { describe, expect, expectTypeOf, it } from 'vitest'
import { command, type Values } from '../../cli/command.js'
import { CliError } from '../../cli/errors.js'
import { redisUrlOf } from '../../cli/redis.js'
import { EchoMQError } from '../../lib/errors.js'

const options = {
  queue: { type: 'string', multiple: true },
  every: { type: 'string' },
  all: { type: 'boolean', default: false },
} as const

/** A command that records what its body was given. */
function recorder(positionals = 0) {
  const calls: { values: Values<typeof options>; positionals: string[] }[] = []
  const cmd = command({
    summary: 's',
    usage: 'echomq test',
    options,
    positionals,
    async run(values, rest) {
      calls.push({ values, positionals: rest })
    },
  })
  return { cmd, calls }
}

async function runs(cmd: ReturnType<typeof recorder>['cmd'], args: string[]): Promise<void> {
  const parsed = cmd.parse(args)
  if (parsed.help) throw new Error('expected a run, got help')
  await parsed.run()
}

const usageError = (fn: () => unknown): CliError => {
  try {
    fn()
  } catch (err) {
    if (err instanceof CliError) return err
    throw err
  }
  throw new Error('expected a usage error')
}

describe('typed flags', () => {
  it('the values have the types the declaration gives them, COMMON flags included', () => {
    expectTypeOf<Values<typeof options>>().toEqualTypeOf<{
      queue?: string[]
      every?: string
      all: boolean
      'redis-url'?: string
      prefix?: string
      json: boolean
      help: boolean
    }>()
  })

  it('parses lists, strings, booleans with their defaults, and positionals', async () => {
    const { cmd, calls } = recorder(1)
    await runs(cmd, ['emails', '--queue', 'a', '--queue', 'b,c', '--every', '10s', '--json'])
    await runs(cmd, [])
    expect(calls.map((c) => ({ ...c.values }))).toEqual([
      { queue: ['a', 'b,c'], every: '10s', json: true, all: false, help: false },
      { json: false, all: false, help: false },
    ])
    expect(calls.map((c) => c.positionals)).toEqual([['emails'], []])
  })

  it('a negative number after a string flag is its value (for the command to check), not a flag', async () => {
    const { cmd, calls } = recorder(2)
    await runs(cmd, ['--every', '-5', '--queue', '-1x', 'pos', '--', '-3'])
    expect(calls.map((c) => c.values.every)).toEqual(['-5'])
    expect(calls.map((c) => c.values.queue)).toEqual([['-1x']])
    expect(calls.map((c) => c.positionals)).toEqual([['pos', '-3']])
    // A boolean flag takes no value: "-5" after it is still refused.
    expect(usageError(() => cmd.parse(['--all', '-5'])).message).toMatch(/-5/)
  })

  it('--help asks for help and runs nothing, whatever else is missing', () => {
    const { cmd, calls } = recorder()
    expect(cmd.parse(['--help', 'extra']).help).toBe(true)
    expect(cmd.parse(['-h']).help).toBe(true)
    expect(calls).toEqual([])
  })

  it.each([
    [['--bogus'], /Unknown option '--bogus'/],
    [['--every'], /argument missing/],
    [['--all=yes'], /does not take an argument/],
    [['extra'], /unexpected argument: extra/],
  ])('%j is a usage error', (args, message) => {
    const { cmd, calls } = recorder()
    const err = usageError(() => cmd.parse(args))
    expect(err.usage).toBe(true)
    expect(err.message).toMatch(message)
    expect(calls).toEqual([])
  })
})

describe('the Redis URL of a command', () => {
  const FLAG = 'redis://flag:6379'
  const VARIABLE = 'redis://variable:6379'
  const SECRET = 'redis://user:pw@secret:6379'
  /** A stand-in for SSM: records the names it is asked for. */
  const ssm = (value = SECRET) => {
    const asked: string[] = []
    const read = async (name: string) => {
      asked.push(name)
      return value
    }
    return { asked, read }
  }
  const env = { REDIS_URL: VARIABLE, REDIS_URL_PARAMETER: '/p' }

  it('--redis-url, then REDIS_URL, then the parameter, then the local default', async () => {
    const s = ssm()
    expect(await redisUrlOf({ 'redis-url': FLAG }, env, s.read)).toEqual({ url: FLAG, fallback: false })
    expect(await redisUrlOf({}, env, s.read)).toEqual({ url: VARIABLE, fallback: false })
    expect(s.asked).toEqual([])
    expect(await redisUrlOf({}, { REDIS_URL_PARAMETER: '/p' }, s.read)).toEqual({ url: SECRET, fallback: false })
    expect(s.asked).toEqual(['/p'])
    expect(await redisUrlOf({}, {}, s.read)).toEqual({ url: 'redis://127.0.0.1:6379', fallback: true })
  })

  it('an empty --redis-url or REDIS_URL counts as not given; a value from SSM loses its trailing newline', async () => {
    expect(await redisUrlOf({ 'redis-url': '' }, { REDIS_URL: ' ' }, ssm().read)).toMatchObject({ fallback: true })
    expect(await redisUrlOf({}, { REDIS_URL_PARAMETER: '/p' }, ssm(`${SECRET}\n`).read)).toEqual({ url: SECRET, fallback: false })
  })

  it('a bad URL is a usage error; a bad value from SSM an ERR_CONFIG that does not quote it', async () => {
    const flag = await redisUrlOf({ 'redis-url': 'http://x' }, {}, ssm().read).catch((e: unknown) => e)
    expect(flag).toBeInstanceOf(CliError)
    expect(flag).toMatchObject({ usage: true, message: expect.stringMatching(/expected a redis:\/\//) })
    const secret = await redisUrlOf({}, { REDIS_URL_PARAMETER: '/p' }, ssm('hunter2').read).catch((e: unknown) => e)
    expect(secret).toBeInstanceOf(EchoMQError)
    expect(secret).toMatchObject({ code: 'ERR_CONFIG', variable: 'REDIS_URL_PARAMETER' })
    expect(String(secret)).toMatch(/SSM parameter \/p: expected a redis:\/\/.*\(value not shown\)/)
    expect(String(secret)).not.toContain('hunter2')
  })

  it('in Lambda with no source it fails instead of using localhost (the reaper\u2019s rule)', async () => {
    const err = await redisUrlOf({}, { AWS_LAMBDA_FUNCTION_NAME: 'f' }, ssm().read).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'ERR_CONFIG', variable: 'REDIS_URL_PARAMETER' })
  })
})
