/**
 * A BullMQ 6.7 program type-checks against EchoMQ with only its import changed (test/package/types/bullmq-program.ts,
 * `strict` and `exactOptionalPropertyTypes`), and the same program, its import put back to 'bullmq',
 * type-checks against BullMQ 6.7 (the bench's dev dependency): so it is a BullMQ program, not one written
 * for EchoMQ. Its `@ts-expect-error` lines check that the types still refuse what BullMQ's refuse.
 */
import { execFile } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '../..')
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const run = promisify(execFile)

async function typeCheck(project: string): Promise<string> {
  try {
    await run(process.execPath, [tsc, '--noEmit', '-p', project], { cwd: root, timeout: 120_000 })
    return ''
  } catch (err) {
    return String((err as { stdout?: string }).stdout ?? err)
  }
}

describe('a BullMQ 6.7 program', () => {
  it('type-checks against EchoMQ with only the import changed', { timeout: 130_000 }, async () => {
    expect(await typeCheck('test/package/types/tsconfig.json')).toBe('')
  })

  it("type-checks against BullMQ 6.7 with the import put back to 'bullmq'", { timeout: 130_000 }, async () => {
    // Under node_modules, so 'bullmq' and @types/node resolve from the repository's node_modules.
    const dir = join(root, 'node_modules', '.cache', 'echomq-bullmq-types')
    await mkdir(dir, { recursive: true })
    const program = await readFile(join(root, 'test', 'package', 'types', 'bullmq-program.ts'), 'utf8')
    expect(program).toContain("from '../../../lib/index.js'")
    await writeFile(join(dir, 'program.ts'), program.replace("from '../../../lib/index.js'", "from 'bullmq'"))
    const compilerOptions = {
      target: 'ES2022',
      module: 'ESNext',
      moduleResolution: 'bundler',
      lib: ['ES2022'],
      types: ['node'],
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: true,
      noEmit: true,
    }
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['program.ts'] }))
    expect(await typeCheck(dir)).toBe('')
  })
})
