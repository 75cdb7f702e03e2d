/**
 * Server-side measurement, read from Redis itself: INFO commandstats (usec and calls per command, reset
 * with CONFIG RESETSTAT), INFO cpu, and SLOWLOG. Commands that Lua scripts run are counted in
 * commandstats (and logged by SLOWLOG with client address "?:0") next to the EVALSHA that ran them, so
 * totals here only add up top-level commands: the ones a client sent. The meter's own commands
 * (INFO, CONFIG, SLOWLOG) are left out.
 */
import type { Redis } from 'ioredis'
import { METER_NAME } from './redis.js'

export type CmdStats = Record<string, { calls: number; usec: number }>

/** Script commands: always top-level (a script cannot call another). */
export const SCRIPT_CMDS = ['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro']
const METER_CMDS = /^(info|config\|.*|slowlog\|.*|ping|client\|.*|hello|select|command\|?.*|script\|.*)$/

export async function commandStats(meter: Redis): Promise<CmdStats> {
  const stats: CmdStats = {}
  for (const line of (await meter.info('commandstats')).split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim())
    if (m?.[1]) stats[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) }
  }
  return stats
}

export function subtract(after: CmdStats, before: CmdStats): CmdStats {
  const out: CmdStats = {}
  for (const [cmd, v] of Object.entries(after)) {
    const b = before[cmd] ?? { calls: 0, usec: 0 }
    if (v.calls - b.calls > 0) out[cmd] = { calls: v.calls - b.calls, usec: v.usec - b.usec }
  }
  return out
}

/** Commandstats without the meter's own commands. */
export function withoutMeter(stats: CmdStats): CmdStats {
  return Object.fromEntries(Object.entries(stats).filter(([cmd]) => !METER_CMDS.test(cmd)))
}

export function sum(stats: CmdStats, names: readonly string[]): { calls: number; usec: number } {
  let calls = 0
  let usec = 0
  for (const n of names) {
    calls += stats[n]?.calls ?? 0
    usec += stats[n]?.usec ?? 0
  }
  return { calls, usec }
}

export async function resetStats(meter: Redis): Promise<void> {
  await meter.config('RESETSTAT')
  await meter.slowlog('RESET')
}

/** Sets the SLOWLOG threshold (µs; -1 disables, 0 logs every command, script-inner ones included). */
export async function slowlogThreshold(meter: Redis, usec: number): Promise<void> {
  await meter.config('SET', 'slowlog-log-slower-than', String(usec))
}

export interface SlowEntry {
  usec: number
  cmd: string
  client: string
}

/** SLOWLOG entries of commands clients sent (script-inner commands and the meter's own left out). */
export async function topLevelSlowlog(meter: Redis): Promise<SlowEntry[]> {
  const raw = (await meter.call('SLOWLOG', 'GET', '-1')) as [number, number, number, string[], string, string][]
  return raw
    .filter(([, , , , addr, name]) => addr !== '?:0' && name !== METER_NAME)
    .map(([, , usec, args, , name]) => ({ usec, cmd: String(args[0]).toLowerCase(), client: name }))
}

/** CPU seconds (user + sys) the redis-server process has used, from INFO cpu, in µs. */
export async function redisCpuUs(meter: Redis): Promise<number> {
  const info = await meter.info('cpu')
  const num = (k: string) => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0)
  return Math.round((num('used_cpu_user') + num('used_cpu_sys')) * 1e6)
}

/**
 * Times every call of the given client methods on the server: after each call resolves, the meter reads
 * commandstats, and the call's time is the growth of `names`' usec since the previous reading. Exact as
 * long as nothing else sends those commands meanwhile (the measured code runs alone and sequentially).
 */
export function timeEachCall(client: Redis, meter: Redis, methods: string[], names: readonly string[]) {
  const calls: { method: string; usec: number }[] = []
  let last: CmdStats = {}
  const target = client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
  const originals = new Map(methods.map((m) => [m, target[m] as (...args: unknown[]) => Promise<unknown>]))
  for (const [m, original] of originals) {
    target[m] = async (...args: unknown[]) => {
      try {
        return await original.apply(client, args)
      } finally {
        const now = await commandStats(meter)
        calls.push({ method: m, usec: sum(now, names).usec - sum(last, names).usec })
        last = now
      }
    }
  }
  return {
    calls,
    async start() {
      calls.length = 0
      last = await commandStats(meter)
    },
    restore() {
      for (const m of methods) delete target[m]
    },
  }
}
