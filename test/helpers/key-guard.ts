/**
 * The key guard: a Lua prologue for setScriptWrapper (lib/redis/commands.ts) that makes every redis.call /
 * redis.pcall of a script fail when it names a key that was not passed in KEYS, when it uses a command
 * the guard does not know (so a new command must be classified here before the tests pass), or when the
 * script was run with no KEYS at all. Redis Cluster routes a script by its keys, so a key outside KEYS
 * could live on another node: this guard finds such keys on a plain standalone Redis.
 *
 * It shadows the global `redis` with a local table, so it works whether or not Redis lets a script
 * modify the global `redis` table, and it is in scope for the whole script: `local rcall = redis.call`
 * and the includes' `redis.call(...)` all resolve to the guarded call.
 */

import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest'
import { setScriptWrapper } from '../../lib/redis/commands.js'
import { type QueueFixture, useQueue } from './fixture.js'
import { type TestRedis, useRedis } from './redis-server.js'

export const GUARD_CODE = 'EMQGUARD'

/** Commands whose first argument is their only key. */
const FIRST_ARG_KEY = [
  'GET',
  'SET',
  'PEXPIRE',
  'PEXPIREAT',
  'EXPIRE',
  'PTTL',
  'TTL',
  'TYPE',
  'INCR',
  'HSET',
  'HGET',
  'HMGET',
  'HGETALL',
  'HSCAN',
  'HKEYS',
  'HINCRBY',
  'HDEL',
  'HEXISTS',
  'HLEN',
  'HSTRLEN',
  'LPUSH',
  'RPUSH',
  'LPOP',
  'RPOP',
  'LPOS',
  'LREM',
  'LLEN',
  'LRANGE',
  'LINDEX',
  'LSET',
  'ZADD',
  'ZREM',
  'ZSCORE',
  'ZRANK',
  'ZMSCORE',
  'ZCARD',
  'ZRANGE',
  'ZRANGEBYSCORE',
  'ZREVRANGEBYSCORE',
  'ZREMRANGEBYSCORE',
  'ZPOPMIN',
  'ZINCRBY',
  'SADD',
  'SREM',
  'SISMEMBER',
  'SMISMEMBER',
  'SMEMBERS',
  'SCARD',
  'XADD',
  'XLEN',
  'LTRIM',
]
/** Commands whose every argument is a key. */
const ALL_ARGS_KEYS = ['EXISTS', 'DEL', 'UNLINK', 'TOUCH', 'MGET']
/** Commands without keys. */
const NO_KEYS = ['TIME']
/** Commands whose second argument is their only key (a subcommand comes first). */
const SECOND_ARG_KEY = ['OBJECT']

const luaSet = (names: string[]) => `{ ${names.map((n) => `${n} = true`).join(', ')} }`

export const GUARD_PROLOGUE = `-- ${GUARD_CODE} key guard (test/helpers/key-guard.ts)
local __emq_real = redis
if #KEYS == 0 then
  error(__emq_real.error_reply('${GUARD_CODE} script run with no KEYS'))
end
local __emq_declared = {}
for _, k in ipairs(KEYS) do __emq_declared[k] = true end
local __emq_first, __emq_all, __emq_none = ${luaSet(FIRST_ARG_KEY)}, ${luaSet(ALL_ARGS_KEYS)}, ${luaSet(NO_KEYS)}
local __emq_second = ${luaSet(SECOND_ARG_KEY)}
local function __emq_check(cmd, ...)
  local name = string.upper(tostring(cmd))
  local args = { ... }
  local keys
  if __emq_none[name] then
    keys = {}
  elseif __emq_first[name] then
    if args[1] == nil then error(__emq_real.error_reply('${GUARD_CODE} ' .. name .. ' without a key')) end
    keys = { args[1] }
  elseif __emq_second[name] then
    if args[2] == nil then error(__emq_real.error_reply('${GUARD_CODE} ' .. name .. ' without a key')) end
    keys = { args[2] }
  elseif __emq_all[name] then
    if #args == 0 then error(__emq_real.error_reply('${GUARD_CODE} ' .. name .. ' without a key')) end
    keys = args
  else
    error(__emq_real.error_reply('${GUARD_CODE} command ' .. name .. ' is not known to the key guard'))
  end
  for _, key in ipairs(keys) do
    if not __emq_declared[tostring(key)] then
      error(__emq_real.error_reply('${GUARD_CODE} ' .. name .. ' touches key ' .. tostring(key) .. ' which is not in KEYS'))
    end
  end
end
local redis = setmetatable({
  call = function(cmd, ...) __emq_check(cmd, ...) return __emq_real.call(cmd, ...) end,
  pcall = function(cmd, ...) __emq_check(cmd, ...) return __emq_real.pcall(cmd, ...) end,
}, { __index = __emq_real })
-- end of key guard
`

/** The wrapper to pass to setScriptWrapper. */
export function keyGuard(lua: string): string {
  return GUARD_PROLOGUE + lua
}

/** A script's source as EchoMQ runs it (lib/redis/scripts.ts), before the guard wraps it. */
export { scriptSource } from '../../lib/redis/scripts.js'

/** Every script the file's tests run goes through the guard: installed before them, removed after. */
export function useKeyGuard(): void {
  beforeAll(() => setScriptWrapper(keyGuard))
  afterAll(() => setScriptWrapper(undefined))
}

export interface GuardedQueue {
  redis: TestRedis
  fx: QueueFixture
}

/**
 * The queue fixture on a private redis-server whose scripts all run under the guard: the script cache is
 * flushed with the data before each test (each script is loaded again, guarded), the workers have short
 * leases, and an error any worker reports fails the test (checked once the workers are closed).
 */
export function useGuardedQueue(): GuardedQueue {
  useKeyGuard()
  const redis = useRedis()
  const errors: unknown[] = []
  beforeEach(async () => {
    await redis.client.script('FLUSH')
    errors.length = 0
  })
  afterEach(() => {
    expect(errors).toEqual([])
  })
  // After the hooks above: the queue is made after the flush, and workers close before errors are checked.
  const fx = useQueue(redis, {
    workers: { lockDuration: 300, heartbeatInterval: 50, closeTimeout: 2_000 },
    onError: (err) => errors.push(err),
  })
  return { redis, fx }
}
