/**
 * The reaper of one Lambda container, for functions/sweep.ts: each invocation parses its event, reads the
 * configuration (the Redis URL from SSM, reused for its max age, see secrets.ts), runs the reaper kept
 * from the last invocation (its connection, CloudWatch client and discovery state), and returns the
 * summary. A Redis URL that changed in SSM (a rotated password, a moved endpoint) replaces the reaper and
 * its connection. After a failure that a stale URL may explain (ERR_AUTH: refused credentials,
 * ERR_CONNECTION: unreachable) the connection is dropped and the next invocation reads SSM at once.
 *
 * Every failure of an invocation (the event, the configuration, SSM, Redis) is one ERROR log line, message
 * "invocation failed", with `errorCode`, `error`, `hint` and `variable` where the error has them, then
 * thrown, so Lambda counts it in its Errors metric (the function-errors alarm).
 */
import { EchoMQError } from '../errors.js'
import { lambdaSettings, loadReaperConfig } from './config.js'
import { queuesFromEvent } from './event.js'
import type { Log } from './log.js'
import { createReaper, type Reaper, type ReaperSummary } from './reaper.js'
import { secretReader } from './secrets.js'

type Env = Record<string, string | undefined>

export interface ContainerReaper {
  /** One invocation; `remainingMs`: the Lambda's time left, when known. */
  invoke(event: unknown, remainingMs?: () => number): Promise<ReaperSummary>
  /** Closes the Redis connection (tests, local runs). */
  close(): Promise<void>
}

export function containerReaper(env: Env, log: Log): ContainerReaper {
  const { closeAfterRun } = lambdaSettings(env)
  let reaper: Reaper | undefined
  let url: string | undefined
  let refresh = false
  const readSecret = secretReader()
  const drop = async () => {
    await reaper?.close().catch(() => undefined)
    reaper = undefined
  }
  return {
    async invoke(event, remainingMs) {
      try {
        const queues = queuesFromEvent(event)
        const warn = (message: string) => log('warn', message)
        const config = await loadReaperConfig({}, env, (name, maxAgeS) => readSecret(name, { maxAgeS, forceFetch: refresh, warn }))
        refresh = false
        if (reaper && config.redisUrl !== url) {
          log('info', 'the Redis URL changed in SSM: reconnecting')
          await drop()
        }
        url = config.redisUrl
        reaper ??= createReaper(config, { log })
        return await reaper.run({ ...(queues ? { queues } : {}), ...(remainingMs ? { remainingMs } : {}) })
      } catch (err) {
        if (err instanceof EchoMQError && (err.code === 'ERR_CONNECTION' || err.code === 'ERR_AUTH')) {
          await drop()
          refresh = true
        }
        log('error', 'invocation failed', failureFields(err))
        throw err
      } finally {
        if (closeAfterRun) await reaper?.close()
      }
    },
    close: async () => reaper?.close(),
  }
}

/** The fields of the "invocation failed" line. */
function failureFields(err: unknown): Record<string, string> {
  if (!(err instanceof EchoMQError))
    return { errorCode: 'ERR_UNEXPECTED', error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) }
  return {
    errorCode: err.code,
    error: err.message,
    ...(err.hint === undefined ? {} : { hint: err.hint }),
    ...(err.variable === undefined ? {} : { variable: err.variable }),
  }
}
