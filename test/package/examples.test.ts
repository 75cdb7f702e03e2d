/**
 * The examples the README and docs/ show, run as a user runs them: each file of examples/ with plain `node`,
 * importing `echomq` by its package name, against a redis-server this file starts (REDIS_URL). The package is
 * built once, by its own build script, into a copy of the package in a temporary directory (its node_modules a
 * link to this repository's), so the repository's dist/ is neither needed nor touched. And the code blocks the
 * docs show are these files, character for character.
 */

import { execFile } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { useRedis } from '../helpers/redis-server.js'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8')
const examples = readdirSync(path.join(root, 'examples')).filter((f) => f.endsWith('.mjs'))

/** Where each example is shown, as a ```js block equal to the file. */
const shownIn: Record<string, string[]> = {
  'quick-start.mjs': ['README.md', 'docs/guide.md'],
  'schedule.mjs': ['docs/guide.md'],
  'dashboard.mjs': ['docs/dashboard.md'],
}

/** What each example must print (its comments say the same). */
const prints: Record<string, RegExp[]> = {
  'quick-start.mjs': [/^sent to ada@example\.com$/m, /completed: 1,/],
  'schedule.mjs': [/^digest 200$/m, /^2 true$/m, /^true$/m],
  'dashboard.mjs': [/^200 true$/m, /^404$/m],
}

describe('the examples in the docs', () => {
  it('are shown in the docs exactly as the files hold them, and each file is shown somewhere', () => {
    expect(Object.keys(shownIn).sort()).toEqual([...examples].sort())
    for (const [file, docs] of Object.entries(shownIn))
      for (const doc of docs) expect(read(doc), `${doc} shows examples/${file}`).toContain(`\`\`\`js\n${read(`examples/${file}`)}\`\`\``)
  })

  describe('run with plain node against a real Redis', () => {
    const redis = useRedis()
    let work = ''
    let pkg = ''

    beforeAll(async () => {
      work = mkdtempSync(path.join(tmpdir(), 'echomq-examples-'))
      pkg = path.join(work, 'echomq')
      for (const part of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'lib', 'cli', 'lua', 'scripts', 'examples'])
        cpSync(path.join(root, part), path.join(pkg, part), { recursive: true })
      symlinkSync(path.join(root, 'node_modules'), path.join(pkg, 'node_modules'), 'dir')
      await run(process.execPath, ['scripts/build.mjs'], { cwd: pkg, timeout: 240_000 })
    }, 300_000)

    afterAll(() => {
      if (work) rmSync(work, { recursive: true, force: true })
    })

    it.each(examples)('%s prints what its comments say', async (file) => {
      const { stdout, stderr } = await run(process.execPath, [path.join('examples', file)], {
        cwd: pkg,
        env: { ...process.env, REDIS_URL: redis.url, NODE_OPTIONS: '' },
        timeout: 20_000,
      })
      expect(stderr).toBe('')
      for (const line of prints[file] ?? [/never/]) expect(stdout).toMatch(line)
    })
  })
})
