/**
 * What `connection` may be: Redis URLs (parsing, and the password mask every message uses), ioredis
 * options (`{ host, port, ... }`) and clients, and nonsense refused as a configuration mistake; and what a
 * failure to connect says (a filtered port; TLS mismatches are in tls.test.ts, clusters in tls-cluster.test.ts).
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/sweep.js'
import { redisError } from '../../lib/errors.js'
import { EchoMQError, Queue, sweep, Worker } from '../../lib/index.js'
import { parseRedisUrl, redactUrl } from '../../lib/redis/connection.js'
import { DIAGNOSIS_TIMEOUT_MS } from '../../lib/redis/diagnosis.js'
import { type FilteredPort, startFilteredPort } from '../helpers/filtered-port.js'
import { useClosing } from '../helpers/fixture.js'
import { useRedis } from '../helpers/redis-server.js'

const run = promisify(execFile)
const BIN = new URL('../../bin/echomq.js', import.meta.url).pathname

describe('redactUrl', () => {
  it.each([
    ['redis://user:s3cret@host:6379/0', 'redis://user:***@host:6379/0'],
    ['redis://user:s3cr/et@host:1/2', 'redis://user:***@host:1/2'],
    ['redis://user:p@ss@host', 'redis://user:***@host'],
    ['rediss://:pw@h:6380', 'rediss://:***@h:6380'],
    ['redis+cluster://u:pw@a:1,b:2', 'redis+cluster://u:***@a:1,b:2'],
    ['redis://user@host', 'redis://user@host'],
    ['redis://host:6379', 'redis://host:6379'],
  ])('%s -> %s', (url, masked) => {
    expect(redactUrl(url)).toBe(masked)
  })
})

describe('parseRedisUrl', () => {
  it('takes credentials up to the last @, so a password may hold @ and /', () => {
    expect(parseRedisUrl('rediss://emq:p@ss/w0rd@cache.example:6380/3')).toEqual({
      tls: true,
      cluster: false,
      username: 'emq',
      password: 'p@ss/w0rd',
      db: 3,
      nodes: [{ host: 'cache.example', port: 6380 }],
    })
  })

  it('reads cluster seeds', () => {
    expect(parseRedisUrl('redis+cluster://a:7000,b:7001').nodes).toEqual([
      { host: 'a', port: 7000 },
      { host: 'b', port: 7001 },
    ])
  })

  it.each(['http://user:hunter2@host', 'redis://user:hunter2@', 'redis://user:hunter2@host/x'])(
    'rejects %s without showing the password',
    (url) => {
      let caught: unknown
      try {
        parseRedisUrl(url)
      } catch (err) {
        caught = err
      }
      expect(caught).toBeInstanceOf(EchoMQError)
      // A URL that is not one is a configuration mistake, not a failure to connect.
      expect(caught).toMatchObject({ code: 'ERR_OPTIONS', variable: 'connection' })
      expect((caught as Error).message).not.toContain('hunter2')
    },
  )
})

describe('redisError: what a connection failure says about the server', () => {
  it.each([
    ['Protocol error, got "H" as reply type byte', /^add q: .*not as Redis does: check the host and port/],
    ['write ECONNRESET', /dropped the connection: .*check the host and port/],
    ['connect ECONNREFUSED 127.0.0.1:1', /^add q: connect ECONNREFUSED 127\.0\.0\.1:1$/],
  ])('%s', (message, expected) => {
    const err = redisError('q', 'add', new Error(message))
    expect(err.code).toBe('ERR_CONNECTION')
    expect(err.message).toMatch(expected)
  })

  it("the connection error kept from connecting (a protocol error) is named beside the command's own failure", () => {
    const err = redisError('q', 'add', new Error('Reached the max retries per request limit'), new Error('Unknown RESP type H'))
    expect(err.message).toMatch(/not as Redis does/)
  })
})

describe('ioredis options as connection ({ host, port, ... }, as BullMQ accepts them)', () => {
  const redis = useRedis()
  const track = useClosing()

  it('Queue, Worker and sweep run on them; a port given as a string (from the environment) is taken', async () => {
    const connection = { host: '127.0.0.1', port: String(redis.port), db: 0, maxRetriesPerRequest: null }
    // A string port is EchoMQ's leniency (the type says number, as ioredis's and BullMQ's).
    // direct: connection options given as an object (a string port) are under test
    const queue = track(new Queue('q', { connection: connection as never }))
    await queue.add('job', { n: 1 }, { jobId: 'a' })
    const done = new Promise((resolve) =>
      // direct: connection options given as an object are under test
      track(new Worker('q', async () => 'ok', { connection: connection as never })).on('completed', resolve),
    )
    await done
    expect(await queue.getJob('a')).toMatchObject({ state: 'completed', returnValue: 'ok' })
    expect(await sweep({ host: '127.0.0.1', port: redis.port }, 'q')).toEqual({ marked: [], recovered: [], failed: [] })
  })

  it("ioredis 6.1's options are taken: a TLS profile's name (its CA on the client), the maintenance ones", async () => {
    const profiled = { host: '127.0.0.1', port: redis.port, tls: 'RedisCloudFixed', lazyConnect: true } as const
    // direct: a TLS profile's name as connection option is under test
    const secured = track(new Queue('q', { connection: profiled }))
    expect((secured.client.options as { tls?: { ca?: string } }).tls?.ca).toContain('BEGIN CERTIFICATE')
    const connection = { host: '127.0.0.1', port: redis.port, maintNotifications: 'disabled', maintRelaxedCommandTimeout: 5_000 } as const
    // direct: ioredis 6.1's maintenance options are under test
    const queue = track(new Queue('q', { connection }))
    expect(await queue.add('job', {}, { jobId: 'm' })).toMatchObject({ id: 'm' })
  })

  it("ioredis 6.1's maintenance options with values it does not know are refused (ERR_OPTIONS), before any connection", () => {
    for (const wrong of [
      { maintNotifications: 'bogus' },
      { maintNotifications: true },
      { maintEndpointType: 'public' },
      { maintRelaxedCommandTimeout: -5 },
      { maintRelaxedSocketTimeout: '10s' },
    ]) {
      // direct: the connection options' validation is under test
      const make = () => new Queue('q', { connection: { host: '127.0.0.1', port: redis.port, ...wrong } as never })
      expect(make).toThrow(
        expect.objectContaining({ code: 'ERR_OPTIONS', message: expect.stringContaining(Object.keys(wrong)[0] as string) }),
      )
    }
  })

  it('a connection error names where the options point, without the password', async () => {
    await redis.client.call('ACL', 'SETUSER', 'u', 'on', '>right', '~*', '&*', '+@all')
    // direct: a connection error on options with a wrong password is under test
    const queue = track(new Queue('q', { connection: { host: '127.0.0.1', port: redis.port, username: 'u', password: 'wrong-pw' } }))
    const err = (await queue.add('job', {}).catch((e: unknown) => e)) as EchoMQError
    expect(err).toMatchObject({ code: 'ERR_CONNECTION', message: expect.stringMatching(/WRONGPASS/) })
    expect(err.message).toContain(`Redis at redis://u@127.0.0.1:${redis.port}`)
    expect(err.message).not.toContain('wrong-pw')
  })

  it('a client passed in is used as given and not closed with the Queue or Worker', async () => {
    const client = redis.connect()
    // direct: a client passed in, and not closed by the Queue, is under test
    const queue = new Queue('q', { connection: client })
    // direct: a client passed in, and not closed by the Worker, is under test
    const worker = new Worker('q', async () => 'ok', { connection: client })
    await queue.add('job', {})
    await Promise.all([queue.close(), worker.close()])
    expect(client.status).toBe('ready')
    expect(await client.ping()).toBe('PONG')
  })

  it.each<[string, unknown, RegExp]>([
    ['{ hostname }', { hostname: 'cache.example' }, /unknown ioredis option "hostname" \(ioredis calls it host\)/],
    ['{ url }', { url: 'redis://127.0.0.1:6379' }, /no url: pass the URL string itself as connection/],
    ['a misspelt name', { prot: 6379 }, /unknown ioredis option "prot" \(did you mean "port"\?\)/],
    ['a port out of range', { host: '127.0.0.1', port: 99_999 }, /expected port to be an integer in 1-65535, got: 99999/],
    ['an empty host', { host: ' ' }, /expected host to be a host name or address/],
    ['tls: true', { host: 'h', tls: true }, /expected tls to be an object of node:tls options \(\{\} for the defaults\)/],
    ['an unknown TLS profile', { host: 'h', tls: 'RedisCloud' }, /or the name of a TLS profile of ioredis .*got: "RedisCloud"/],
    [
      'an unknown tls.profile',
      { host: 'h', tls: { profile: 'NoSuch' } },
      /expected tls.profile to be the name of a TLS profile .*got: "NoSuch"/,
    ],
    ['a negative db', { db: -1 }, /expected db to be a database number/],
    ['keyPrefix', { keyPrefix: 'app:' }, /keyPrefix is not supported: use the prefix option/],
    ['a client with keyPrefix', new Redis({ lazyConnect: true, keyPrefix: 'app:' }), /keyPrefix is not supported/],
    [
      'a number',
      6379,
      /expected connection to be a redis:\/\/.*URL, ioredis options \(\{ host, port.*\}\), or an ioredis Redis or Cluster, got: number 6379/,
    ],
    ['null', null, /got: null/],
    ['an array', ['redis://127.0.0.1'], /got: an array/],
    ['another class', new Map(), /got: an instance of Map/],
  ])('%s is refused with ERR_OPTIONS saying what is accepted, before anything reaches Redis', async (_, connection, message) => {
    const before = await redis.client.dbsize()
    for (const make of [
      // direct: bad connection options refused by the constructor are under test
      () => new Queue('q', { connection: connection as never }),
      // direct: bad connection options refused by the constructor are under test
      () => new Worker('q', async () => 'ok', { connection: connection as never }),
    ]) {
      let caught: unknown
      try {
        track(make())
      } catch (err) {
        caught = err
      }
      expect(caught).toBeInstanceOf(EchoMQError)
      expect(caught).toMatchObject({ code: 'ERR_OPTIONS', variable: 'connection', message: expect.stringMatching(message) })
    }
    await expect(sweep(connection, 'q')).rejects.toMatchObject({ code: 'ERR_OPTIONS' })
    expect(await redis.client.dbsize()).toBe(before)
  })
})

describe('a filtered port (a security group that does not let the client in)', () => {
  let filtered: FilteredPort
  beforeAll(async () => {
    filtered = await startFilteredPort()
  })
  afterAll(async () => {
    await filtered?.stop()
  })

  it('the reaper fails within its timeout and the diagnosis, saying the port is filtered and what to check', async () => {
    const handler = createHandler({ REDIS_URL: filtered.url, METRICS_MODE: 'off', IS_LOCAL: 'true', REDIS_TIMEOUT_MS: '1000' })
    const started = performance.now()
    const err = (await handler({}, {}).catch((e: unknown) => e)) as EchoMQError
    expect(performance.now() - started).toBeLessThan(1_000 + DIAGNOSIS_TIMEOUT_MS + 1_000)
    expect(err).toMatchObject({ code: 'ERR_CONNECTION', hint: expect.stringMatching(/port is filtered.*security group/) })
    expect(err.message).toMatch(new RegExp(`no TCP connection to 127\\.0\\.0\\.1:${filtered.port} within ${DIAGNOSIS_TIMEOUT_MS} ms`))
  })

  it('a Queue call fails saying so, and so does echomq stats', async () => {
    // direct: a queue on a filtered port (not the test Redis) whose call must fail
    const queue = new Queue('q', { connection: filtered.url })
    const err = (await queue.add('job', {}).catch((e: unknown) => e)) as EchoMQError
    await queue.close()
    expect(err).toMatchObject({ code: 'ERR_CONNECTION', message: expect.stringMatching(/no TCP connection .*port is filtered/) })
    const cli = await run(process.execPath, [BIN, 'stats', '--redis-url', filtered.url]).catch((e: { code: number; stderr: string }) => e)
    expect(cli).toMatchObject({ code: 1, stderr: expect.stringMatching(/port is filtered or the host unreachable from here/) })
  }, 30_000)
})
