// esbuild plugins for the function's bundle (serverless.yml custom.esbuild.plugins): the Lua scripts built into the
// JavaScript, as in the package, so the zip needs no lua/ directory and the library reads no file to find them.
module.exports = [require('../scripts/embed-lua.cjs').embedLua]
