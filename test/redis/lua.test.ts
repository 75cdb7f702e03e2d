/** The conventions every script keeps: verb-N.lua with N fixed KEYS, a header naming KEYS and ARGV. */
import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { loadScript } from '../../lib/redis/commands.js'

const dir = new URL('../../lua/', import.meta.url)
const files = readdirSync(dir).filter((f) => f.endsWith('.lua'))

describe.each(files)('%s', (file) => {
  const source = readFileSync(new URL(file, dir), 'utf8')
  const script = loadScript(file)

  it('is named verb-N.lua, N being the highest fixed KEYS index it uses', () => {
    const literal = [...script.lua.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1]))
    expect(Math.max(...literal)).toBe(script.fixedKeys)
  })

  it('opens with a header listing each fixed key and its arguments', () => {
    const header = source.slice(0, source.indexOf(']]'))
    for (let i = 1; i <= script.fixedKeys; i++) expect(header).toMatch(new RegExp(`KEYS\\[${i}\\]`))
    expect(header).toMatch(/ARGV\[1\]|ARGV +none/)
    expect(header).toMatch(/Returns/)
  })

  it('never reads a whole collection inside the script', () => {
    const commands = [...script.lua.matchAll(/(?:rcall|redis\.call)\('(\w+)'/g)].map((m) => m[1]?.toUpperCase())
    expect(commands.length).toBeGreaterThan(0)
    expect(commands.filter((c) => ['SMEMBERS', 'HKEYS', 'HVALS', 'KEYS', 'SCAN'].includes(c ?? ''))).toEqual([])
    // Ranges are bounded: never from the first to the last element.
    expect(script.lua).not.toMatch(/'(LRANGE|ZRANGE)',[^)]*,\s*0\s*,\s*-1\s*\)/)
  })

  it('has every include resolved', () => {
    expect(script.lua).not.toMatch(/@include/)
  })
})
