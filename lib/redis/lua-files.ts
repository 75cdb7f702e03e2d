/**
 * The text of EchoMQ's Lua files, by their path under `lua/` (`add-7.lua`, `includes/now.lua`). Here, in
 * the repository (tsx, vitest), they are read from `lua/` beside `lib/`, found from this module's own URL:
 * never from the working directory or the environment. The package's build (`scripts/build.mjs`) and the
 * Lambda bundle (`scripts/embed-lua.cjs`, an esbuild plugin) replace this module with one that holds every
 * file's text, so an installed package, and any bundle made from it, reads no file at all.
 */
import { readFileSync } from 'node:fs'

/** The text of `lua/<file>`. */
export function luaFile(file: string): string {
  return readFileSync(new URL(`../../lua/${file}`, import.meta.url), 'utf8')
}
