/**
 * package.json against the code: what a library install brings (dependencies), what the reaper needs and names
 * when missing (optional peers, lib/reaper/peers.ts), and that this repository's own pins satisfy the peers.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { OPTIONAL_PEER_DEPENDENCIES } from '../../lib/reaper/peers.js'

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
  peerDependencies: Record<string, string>
  peerDependenciesMeta: Record<string, { optional?: boolean }>
}

describe('package.json', () => {
  it('the library depends on ioredis and cron-parser only (and, types alone, on the types ioredis 6.1 imports)', () => {
    const names = Object.keys(pkg.dependencies).sort()
    expect(names.filter((n) => !n.startsWith('@types/'))).toEqual(['cron-parser', 'ioredis'])
    expect(names.filter((n) => n.startsWith('@types/'))).toEqual(['@types/redis-errors'])
  })

  it("the reaper's packages (and the Lambda client its scaling loads) are optional peers, the same list the entries name when they are missing", () => {
    expect(Object.keys(pkg.peerDependencies).sort()).toEqual([...OPTIONAL_PEER_DEPENDENCIES].sort())
    for (const name of OPTIONAL_PEER_DEPENDENCIES) expect({ name, ...pkg.peerDependenciesMeta[name] }).toEqual({ name, optional: true })
  })

  it('the versions pinned here for the deploy project and the tests satisfy the peer ranges', () => {
    for (const [name, range] of Object.entries(pkg.peerDependencies)) {
      const pinned = pkg.devDependencies[name] ?? ''
      const [major, minor] = range.replace(/^\^/, '').split('.').map(Number)
      const [pMajor, pMinor] = pinned.split('.').map(Number)
      expect({ name, pinned, ok: pMajor === major && (pMinor ?? 0) >= (minor ?? 0) }).toMatchObject({ ok: true })
    }
  })
})
