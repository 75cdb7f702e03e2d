/**
 * What the documentation tells a newcomer to import and open, checked against the package: the README and every
 * page under docs/ import EchoMQ by its package name and one of its `exports` entries (never a path inside this
 * repository, which an installed package does not have), other packages only when package.json names them, and
 * every repository file they name exists.
 */

import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../..', import.meta.url))
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  name: string
  exports: Record<string, unknown>
  dependencies?: Record<string, string>
  devDependencies?: Record<string, string>
  peerDependencies?: Record<string, string>
}

function pages(dir: string): string[] {
  if (!existsSync(path.join(root, dir))) return []
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name)
    if (e.isDirectory()) return pages(rel)
    return e.name.endsWith('.md') ? [rel] : []
  })
}

const docs = ['README.md', ...pages('docs')]
const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8')
/** The JavaScript and TypeScript code blocks of a page. */
const codeBlocks = (text: string) =>
  [...text.matchAll(/```(?:ts|js|typescript|javascript|mjs|cjs)\n([\s\S]*?)```/g)].map((m) => m[1] as string)
/** Every module a code block imports or requires. */
const specifiers = (code: string) =>
  [...code.matchAll(/\bfrom\s+['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)|\brequire\(\s*['"]([^'"]+)['"]\s*\)/g)].map(
    (m) => (m[1] ?? m[2] ?? m[3]) as string,
  )
const packageOf = (spec: string) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/')

describe('the documentation, read by a newcomer with the package installed', () => {
  const entries = new Set(Object.keys(pkg.exports).map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`)))
  const named = new Set([
    ...Object.keys(pkg.dependencies ?? {}),
    ...Object.keys(pkg.devDependencies ?? {}),
    ...Object.keys(pkg.peerDependencies ?? {}),
  ])

  it('imports EchoMQ by an entry of its exports map, never by a path inside this repository', () => {
    const imports = docs.flatMap((doc) =>
      codeBlocks(read(doc))
        .flatMap(specifiers)
        .map((spec) => ({ doc, spec })),
    )
    expect(imports.filter(({ spec }) => spec === pkg.name).length).toBeGreaterThan(0)
    const wrong = imports.filter(({ spec }) => {
      if (spec.startsWith('node:') || builtinModules.includes(spec)) return false
      if (packageOf(spec) === pkg.name) return !entries.has(spec)
      return spec.startsWith('.') || spec.startsWith('/') || !named.has(packageOf(spec))
    })
    expect(wrong).toEqual([])
  })

  it('names only repository files that exist', () => {
    const files = docs.flatMap((doc) =>
      [
        ...read(doc).matchAll(
          /\b((?:lib|cli|functions|test|bench|lua|serverless|scripts|docs)\/[\w./-]*\.(?:ts|lua|json|cjs|mjs|md|png))\b/g,
        ),
      ].map((m) => `${doc}: ${m[1]}`),
    )
    expect(files.length).toBeGreaterThan(20)
    expect(files.filter((f) => !existsSync(path.join(root, f.split(': ')[1] as string)))).toEqual([])
  })
})
