/**
 * The README is the front door: short, opening with the two commands a newcomer types first, and every other
 * page reachable from docs/index.md. Every relative link of the README, ARCHITECTURE.md and docs/ leads to a
 * file that exists and, with a `#fragment`, to a heading of that file.
 */

import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../..', import.meta.url))
const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8')
const pages = readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md'))
const docs = ['README.md', 'ARCHITECTURE.md', ...pages.map((p) => `docs/${p}`)]

/** GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
/** The anchors of a page's headings (outside code blocks). */
function anchors(rel: string): Set<string> {
  const text = read(rel).replace(/```[\s\S]*?```/g, '')
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1] as string)))
}

describe('the README', () => {
  const readme = read('README.md')

  it('is at most 300 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300)
  })

  it('starts with the two commands: install and run the demo on a local Redis, and the tests', () => {
    const block = /^# EchoMQ\n\n```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? ''
    const commands = block
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('#')[0]?.trim())
    expect(commands).toEqual(['npm ci && npm start', 'npm test'])
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts
    expect(scripts.start).toBe('node bin/echomq.js demo')
    expect(scripts.test).toMatch(/^vitest run/)
  })

  it('imports the package by its name in its quick start', () => {
    expect(readme).toMatch(/```js\nimport \{[^}]*\bQueue\b[^}]*\} from 'echomq'\n/)
  })
})

describe('the docs', () => {
  it('docs/index.md lists every page of docs/, and the README links the index', () => {
    const index = read('docs/index.md')
    expect(pages.filter((p) => p !== 'index.md' && !index.includes(`](${p})`))).toEqual([])
    expect(read('README.md')).toContain('](docs/index.md)')
  })

  it('every relative link leads to a file that exists, and a #fragment to one of its headings', () => {
    const broken: string[] = []
    let checked = 0
    for (const doc of docs) {
      const text = read(doc).replace(/```[\s\S]*?```/g, '')
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!target || /^[a-z]+:/.test(target)) continue
        checked++
        const [file, fragment] = target.split('#') as [string, string | undefined]
        const rel = file ? path.normalize(path.join(path.dirname(doc), file)) : doc
        if (!existsSync(path.join(root, rel))) broken.push(`${doc}: ${target} (no file ${rel})`)
        else if (fragment && rel.endsWith('.md') && !anchors(rel).has(fragment)) broken.push(`${doc}: ${target} (no heading)`)
      }
    }
    expect(checked).toBeGreaterThan(40)
    expect(broken).toEqual([])
  })
})
