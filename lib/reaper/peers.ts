/**
 * The packages the reaper imports beyond `echomq`'s own dependencies: optional peer dependencies in
 * package.json, installed by whoever runs the reaper (the Lambda, `echomq sweep`, an SSM parameter read by
 * the command), never brought to a library user. Modules that import them are loaded through `withPeers`,
 * which turns Node's ERR_MODULE_NOT_FOUND for the first missing one into an ERR_CONFIG naming those of the
 * path taken that are missing (all the reaper's for its handler; SSM's two for a URL read from SSM).
 */
import { EchoMQError } from '../errors.js'

export const REAPER_PEER_DEPENDENCIES = [
  '@aws-lambda-powertools/logger',
  '@aws-lambda-powertools/parameters',
  '@aws-sdk/client-cloudwatch',
  '@aws-sdk/client-ssm',
] as const

/** What reading a Redis URL from SSM (REDIS_URL_PARAMETER, secrets.ts) loads: named alone when that is the path. */
export const SSM_PEER_DEPENDENCIES = ['@aws-lambda-powertools/parameters', '@aws-sdk/client-ssm'] as const

/** What the reaper loads besides, only when it starts worker functions (WORKER_FUNCTIONS, scaling.ts). */
export const SCALING_PEER_DEPENDENCIES = ['@aws-sdk/client-lambda'] as const

/** Every optional peer dependency of echomq (package.json). */
export const OPTIONAL_PEER_DEPENDENCIES = [...REAPER_PEER_DEPENDENCIES, ...SCALING_PEER_DEPENDENCIES] as const

/** The packages of `peers` (default REAPER_PEER_DEPENDENCIES) that do not resolve from here (none inside a bundle, which holds them). */
function missingPeers(peers: readonly string[] = REAPER_PEER_DEPENDENCIES): string[] {
  const resolve = (import.meta as { resolve?: (specifier: string) => string }).resolve
  if (typeof resolve !== 'function') return []
  return peers.filter((name) => {
    try {
      resolve(name)
      return false
    } catch {
      return true
    }
  })
}

/** `load()` (a dynamic import of a module that imports the peers); `what` needs them, for the message. */
export async function withPeers<T>(what: string, load: () => Promise<T>, peers: readonly string[] = REAPER_PEER_DEPENDENCIES): Promise<T> {
  try {
    return await load()
  } catch (err) {
    const missing = missingPeers(peers)
    if (missing.length === 0) throw err
    throw new EchoMQError('ERR_CONFIG', `${what} needs ${missing.join(', ')}, not installed`, {
      cause: err,
      hint: `install the reaper's optional peer dependencies beside echomq: npm install ${missing.join(' ')}`,
    })
  }
}
