import { EchoMQError } from '../lib/errors.js'
import { withPeers } from '../lib/reaper/peers.js'

/** An error the command reports as a message, without a stack; `usage` errors exit 2, others 1. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly usage = false,
  ) {
    super(message)
    this.name = 'CliError'
  }
}

/** The message of anything thrown (a library error, a parse error, a string). */
export const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err))

/**
 * A module of the reaper (it imports the AWS SDK, an optional peer dependency): when those packages (`peers`,
 * default the reaper's) are missing, a failure (exit 1) that names them and the install command, not the usage error (exit 2) an
 * ERR_CONFIG otherwise means.
 */
export async function loadReaperModule<T>(what: string, load: () => Promise<T>, peers?: readonly string[]): Promise<T> {
  try {
    return await withPeers(what, load, peers)
  } catch (err) {
    if (err instanceof EchoMQError && err.code === 'ERR_CONFIG' && err.hint !== undefined) throw new CliError(`${err.message}; ${err.hint}`)
    throw err
  }
}
