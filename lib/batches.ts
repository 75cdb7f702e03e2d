/**
 * Items split into script calls of at most `count` items and `bytes` bytes (an item larger than `bytes`
 * goes alone), so one call stays well under Redis's argument limit and a few milliseconds of server time.
 */
export function batchesOf<T>(items: readonly T[], limits: { count: number; bytes: number }, sizeOf: (item: T) => number): T[][] {
  const calls: T[][] = [[]]
  let bytes = 0
  for (const item of items) {
    const call = calls[calls.length - 1] as T[]
    const size = sizeOf(item)
    if (call.length > 0 && (call.length >= limits.count || bytes + size > limits.bytes)) {
      calls.push([item])
      bytes = size
    } else {
      call.push(item)
      bytes += size
    }
  }
  return calls
}
