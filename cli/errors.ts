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
