import { scriptSource } from '../../lib/redis/scripts.js'
for (const f of ['finish-16.lua','take-11.lua','add-7.lua','trim-2.lua']) {
  const s = scriptSource(f)
  const fns = [...s.matchAll(/^local function (\w+)/gm)].map(m => m[1])
  const used = fns.filter(n => (s.match(new RegExp(`\\b${n}\\b`, 'g')) ?? []).length > 1)
  console.log(f, 'functions', fns.length, 'unused', fns.filter(n => !used.includes(n)).join(','))
  console.log('  top-level tables/strings:', (s.match(/^local \w+ = (\{|string\.rep)/gm) ?? []).length)
}
