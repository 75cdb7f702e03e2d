// `npm run build` (and `npm pack`'s prepack): the package's dist/ from the TypeScript sources.
//   dist/lib, dist/cli   ES modules, .d.ts and declaration maps (tsc -p tsconfig.build.json; the JSON files they import)
//   dist/lib/redis/lua-files.js   every lua/ file's text (scripts/embed-lua.cjs), so the package reads no file for its scripts
//   dist/lib/ui/assets   the dashboard's CSS and JS, which it serves from beside its module
import { execFileSync } from 'node:child_process'
import { cpSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const { luaModuleSource } = require('./embed-lua.cjs')
const root = fileURLToPath(new URL('..', import.meta.url))
const at = (rel) => fileURLToPath(new URL(`../${rel}`, import.meta.url))

rmSync(at('dist'), { recursive: true, force: true })
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' })
writeFileSync(at('dist/lib/redis/lua-files.js'), luaModuleSource())
cpSync(at('lib/ui/assets'), at('dist/lib/ui/assets'), { recursive: true })
