#!/usr/bin/env node
// Size check run by `npm run lint`: no source file in lib/, cli/ or functions/ over 400 lines and no
// function (declaration, method, accessor, constructor, function expression or arrow) whose body spans
// over 80 lines. The TypeScript compiler's own parser finds the bodies, so a long object literal or
// template string counts only where it sits inside a function.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const FOLDERS = ['lib', 'cli', 'functions']
const MAX_FILE_LINES = 400
const MAX_FUNCTION_LINES = 80

// Files allowed over the limits, each with the reason: none since issue 27's splits merged. An entry names `file`
// (its size is allowed) and `functions` (long functions allowed in it, by the name printed below); one that no
// longer needs to be here is reported, so the list only shrinks.
const ALLOWED = {}

function sourceFiles(dir) {
  const out = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...sourceFiles(path))
    else if (/\.(ts|mts|cts|js|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(path)
  }
  return out
}

function functionName(node, source) {
  if (node.name) return node.name.getText(source)
  if (ts.isConstructorDeclaration(node)) return 'constructor'
  const parent = node.parent
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) {
    return parent.name.getText(source)
  }
  return '(anonymous)'
}

/** `;(() => { ... })()` as a whole statement of the file: a browser script's module scope (lib/ui/assets/app.js), not a function. */
function scriptScope(node) {
  let up = node.parent
  while (up && ts.isParenthesizedExpression(up)) up = up.parent
  if (!up || !ts.isCallExpression(up) || up.arguments.length > 0) return false
  return ts.isExpressionStatement(up.parent) && ts.isSourceFile(up.parent.parent)
}

function longFunctions(file) {
  const text = readFileSync(file, 'utf8')
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const found = []
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body && !scriptScope(node)) {
      const first = source.getLineAndCharacterOfPosition(node.body.getStart(source)).line
      const last = source.getLineAndCharacterOfPosition(node.body.getEnd()).line
      const lines = last - first + 1
      if (lines > MAX_FUNCTION_LINES) found.push({ name: functionName(node, source), line: first + 1, lines })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return { lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0), found }
}

const problems = []
const stale = []
for (const folder of FOLDERS) {
  for (const path of sourceFiles(join(ROOT, folder))) {
    const file = relative(ROOT, path).split('\\').join('/')
    const allowed = ALLOWED[file]
    const { lines, found } = longFunctions(path)
    if (lines > MAX_FILE_LINES && !allowed?.file) problems.push(`${file}: ${lines} lines (max ${MAX_FILE_LINES})`)
    if (allowed?.file && lines <= MAX_FILE_LINES) stale.push(`${file}: ${lines} lines, no longer needs its file allowance`)
    for (const fn of found) {
      if (allowed?.functions.includes(fn.name)) continue
      problems.push(`${file}:${fn.line}: function ${fn.name} is ${fn.lines} lines (max ${MAX_FUNCTION_LINES})`)
    }
  }
}

for (const line of stale) console.log(`sizes: allowlist: ${line}`)
if (problems.length > 0) {
  for (const line of problems) console.error(`sizes: ${line}`)
  process.exit(1)
}
console.log(`sizes: ok (files <= ${MAX_FILE_LINES} lines, functions <= ${MAX_FUNCTION_LINES} lines in ${FOLDERS.join(', ')})`)
