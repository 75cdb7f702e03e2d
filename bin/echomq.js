#!/usr/bin/env node
// The `echomq` command. Installed from the package it runs the built JavaScript (dist/cli) with plain node. In a
// checkout of the repository, where cli/main.ts sits beside it, it runs the TypeScript sources through tsx (a dev
// dependency), so `npm start` and the tests see an edit without a build.
import { existsSync } from 'node:fs'

const fromSource = existsSync(new URL('../cli/main.ts', import.meta.url))
if (fromSource) (await import('tsx/esm/api')).register()
const { main } = await import(fromSource ? '../cli/main.ts' : '../dist/cli/main.js')
process.exitCode = await main(process.argv.slice(2))
