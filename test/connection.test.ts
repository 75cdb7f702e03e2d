/** Redis URLs: parsing and the password mask that every message uses. */
import { describe, expect, it } from 'vitest'
import { redisError } from '../lib/errors.js'
import { EchoMQError } from '../lib/index.js'
import { parseRedisUrl, redactUrl } from '../lib/redis/connection.js'

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
