/**
 * A client that counts the commands it sends, and so do the connections duplicated from it (a Worker
 * duplicates its client for the blocking wait): what per-command pricing bills, a script call counting once.
 */
import { Redis } from 'ioredis'

export interface Counting {
  client: Redis
  /** Command names sent since the client was ready (or since the last reset). */
  sent: string[]
  reset(): void
  close(): void
}

export async function countingClient(port: number): Promise<Counting> {
  const sent: string[] = []
  const clients: Redis[] = []
  const count = (client: Redis): Redis => {
    clients.push(client)
    client.on('error', () => undefined)
    const send = client.sendCommand.bind(client)
    client.sendCommand = ((command: { name: string }) => {
      sent.push(command.name)
      return send(command as never)
    }) as typeof client.sendCommand
    const duplicate = client.duplicate.bind(client)
    client.duplicate = ((...args: Parameters<Redis['duplicate']>) => count(duplicate(...args))) as typeof client.duplicate
    return client
  }
  const client = count(new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 }))
  await client.ping()
  sent.length = 0
  return {
    client,
    sent,
    reset: () => {
      sent.length = 0
    },
    close: () => {
      for (const c of clients) c.disconnect()
    },
  }
}
