/**
 * The key table in lib/redis/keys.ts's header is the layout a reader (and ARCHITECTURE.md) trusts: checked here
 * against what the code does. Every key a script's header lists (its KEYS, with their types) and every key
 * queueKeys builds is in the table; the fields of `meta` the table names are exactly those the scripts
 * (lua/, lua/includes/) and lib/redis/ write (HSET, HDEL, HINCRBY) and the legacy ones they only read (those
 * earlier versions wrote), and every field they read is among them.
 */
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { QUEUE_KEY_NAMES, queueKeys } from '../../lib/redis/keys.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8')
const luaFiles = ['lua', path.join('lua', 'includes')].flatMap((dir) =>
  readdirSync(path.join(root, dir))
    .filter((f) => f.endsWith('.lua'))
    .map((f) => path.join(dir, f)),
)
const libRedis = readdirSync(path.join(root, 'lib', 'redis'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => path.join('lib', 'redis', f))

/** A key's pattern with its placeholders (`<id>`, `<sid>`, `<deduplication id>`) made one: `{q}:de:<>`. */
const pattern = (key: string) => key.replace(/<[^>]*>/g, '<>')
const KEY = /<prefix>:(\{q\}:(?:[\w:-]|<[^>]*>)+|[\w-]+)/

const header = read(path.join('lib', 'redis', 'keys.ts')).split('*/')[0] as string
/** The table: key pattern -> its type. */
const table = new Map(
  [...header.matchAll(new RegExp(`${KEY.source}\\s+(LIST|ZSET|HASH|SET|STRING|STREAM)\\b`, 'g'))].map((m) => [
    pattern(m[1] as string),
    m[2] as string,
  ]),
)
/** The fields of `meta` the table names: the backquoted words of its entry. */
const metaEntry = /<prefix>:\{q\}:meta\s+HASH([\s\S]*?)\n \*\s+<prefix>/.exec(header)?.[1] ?? ''
const documentedFields = new Set([...metaEntry.matchAll(/`([^`]+)`/g)].map((m) => pattern(m[1] as string)))
/** Of those, the fields the table calls legacy: written by earlier versions, read and never written now. */
const legacyFields = new Set([...metaEntry.matchAll(/`([^`]+)` \(legacy\b/g)].map((m) => pattern(m[1] as string)))

/** A Lua call's arguments, split at its top-level commas, up to the parenthesis that closes the call. */
function args(text: string): string[] {
  const out: string[] = []
  let depth = 0
  let current = ''
  for (const ch of text) {
    if (ch === ')' && depth === 0) break
    if (ch === ',' && depth === 0) {
      out.push(current.trim())
      current = ''
      continue
    }
    if (ch === '(' || ch === '{') depth++
    if (ch === ')' || ch === '}') depth--
    current += ch
  }
  return [...out, current.trim()]
}

/**
 * The field names the non-literal expressions stand for, read from the scripts: a deduplication hold's field
 * (`'de:' .. deid`), a deduplication id's next job (`'dn:' .. deid`, keepLastIfActive) and the retention limits (retention.lua's KEEP_FIELDS). Any other expression fails the test,
 * so a new field cannot be written unseen.
 */
function fieldsOf(expr: string, file: string): string[] {
  const literal = /^'([^']*)'$/.exec(expr)
  if (literal) return [literal[1] as string]
  if (/^'de:' \.\. \w+$/.test(expr)) return ['de:<>']
  if (/^'dn:' \.\. [\w[\]]+$/.test(expr)) return ['dn:<>']
  if (expr === 'field' && /(deduplicate|releaseDeduplication)\.lua$/.test(file)) {
    expect(read(file)).toMatch(/local field = 'de:' \.\. deid/)
    return ['de:<>']
  }
  // The holds a call reads, writes or releases together: their fields are built as above, and writeHolds
  // sets `de` (the field that keeps meta a hash table) with them.
  if (/^unpack\((fields|held|released|set)\b/.test(expr) && /(deduplicate|releaseDeduplication)\.lua$/.test(file)) {
    return expr.startsWith('unpack(set') ? ['de', 'de:<>'] : ['de:<>']
  }
  if ((expr === 'field' && file.endsWith('retention.lua')) || expr === 'KEEP_FIELDS[set].meta') {
    const keep = /local KEEP_FIELDS = (\{.*\})/.exec(read(path.join('lua', 'includes', 'retention.lua')))?.[1] ?? ''
    return [...keep.matchAll(/meta = '(\w+)'/g)].map((m) => m[1] as string)
  }
  throw new Error(`${file}: a field of meta the test cannot read: ${expr}`)
}

const WRITES = new Set(['HSET', 'HDEL', 'HINCRBY', 'HSETNX', 'HMSET', 'HINCRBYFLOAT'])

/** The fields of meta each script and lib/redis module writes and reads. */
function metaFields(): { written: Set<string>; read: Set<string> } {
  const written = new Set<string>()
  const readFields = new Set<string>()
  for (const file of luaFiles) {
    for (const m of read(file).matchAll(/(?:rcall|redis\.call)\('(H[A-Z]+)', *(q\.meta|metaKey)\b, *([^\n]*)/g)) {
      const [command, , rest] = [m[1] as string, m[2], m[3] as string]
      const list = args(rest)
      // HSET's field value pairs: the fields at even places; HINCRBY's increment and HGET's lone field the same.
      const fields = command === 'HDEL' || command === 'HMGET' ? list : list.filter((_, i) => i % 2 === 0)
      for (const f of fields.flatMap((e) => fieldsOf(e, file))) (WRITES.has(command) ? written : readFields).add(f)
    }
  }
  for (const file of libRedis) {
    for (const m of read(file).matchAll(/client\.(h[a-z]+)\(keys\.meta, ('[^']*'|`[^`]*`)/g)) {
      const field = pattern((m[2] as string).slice(1, -1).replace(/\$\{[^}]*\}/g, '<x>'))
      ;(WRITES.has((m[1] as string).toUpperCase()) ? written : readFields).add(field)
    }
  }
  return { written, read: readFields }
}

describe("lib/redis/keys.ts's key table", () => {
  it('lists every key a script header names, with the type the header gives', () => {
    const named = luaFiles.flatMap((file) =>
      [
        ...read(file).matchAll(
          new RegExp(`^\\s*KEYS\\[[^\\]]+\\][^\\n]*?(LIST|ZSET|HASH|SET|STRING|STREAM)\\s[^\\n]*?${KEY.source}`, 'gm'),
        ),
      ].map((m) => {
        // A schedule's run is a job whose id is repeat:<sid>:<due>: a job's hash.
        const key = pattern(m[2] as string).replace(/^\{q\}:repeat:.*/, '{q}:<>')
        return { file, key, type: m[1] as string }
      }),
    )
    expect(named.length).toBeGreaterThan(100)
    expect(named.filter(({ key, type }) => table.get(key) !== type)).toEqual([])
  })

  it('lists every key queueKeys builds', () => {
    const keys = queueKeys('p', 'q')
    const built = Object.values(keys).map((k) => (typeof k === 'function' ? k('<id>') : k))
    const patterns = built.map((k) => pattern(k.replace('p:{q}:', '{q}:')))
    expect(patterns.length).toBe(QUEUE_KEY_NAMES.length + 9)
    expect(patterns.filter((p) => !table.has(p))).toEqual([])
  })

  it('names exactly the fields of meta the scripts and lib/redis/ write, the legacy ones they only read, and every field they read', () => {
    const { written, read: readFields } = metaFields()
    expect(written.size).toBeGreaterThan(8)
    expect([...documentedFields].sort()).toEqual([...new Set([...written, ...legacyFields])].sort())
    expect([...legacyFields].filter((f) => written.has(f) || !readFields.has(f))).toEqual([])
    expect([...readFields].filter((f) => !documentedFields.has(f))).toEqual([])
  })
})
