/**
 * A TCP proxy for network-fault tests: clients connect to `proxy.port`, each connection is piped to the
 * target. Faults:
 *   cut()      destroys every open connection (both sides); new connections are accepted as usual
 *   refuse()   cut(), and every new connection is closed at once until resume()
 *   stall()    stops forwarding in both directions (sockets stay open, bytes wait) until resume()
 *   slow(ms)   delays every chunk by `ms` in each direction (order kept)
 *   holdRepliesAfter(match)
 *              (one shot) once a client chunk matching `match` has been forwarded on a connection, that connection's
 *              replies are held (the request reached the server, its reply does not come back); a cut()
 *              then drops them: "the command ran but the client never heard"
 *   resume()   forwards normally again; stalled bytes are delivered
 */
import { connect, createServer, type Server, type Socket } from 'node:net'

type Mode = 'pass' | 'stall' | 'refuse'

interface Pipe {
  client: Socket
  upstream: Socket
  holdReplies: boolean
}

export class TcpProxy {
  readonly stats = { connections: 0, cuts: 0, refused: 0, chunks: 0 }
  private mode: Mode = 'pass'
  private delayMs = 0
  private readonly pipes = new Set<Pipe>()
  /** Chunks held while stalled, per direction, in order. */
  private readonly held: (() => void)[] = []
  private replyTrigger: ((chunk: Buffer) => boolean) | undefined
  /** Connections whose replies are held by holdRepliesAfter(). */
  readonly holding = new Set<Pipe>()

  private constructor(
    private readonly server: Server,
    readonly port: number,
    readonly targetPort: number,
    readonly targetHost: string,
  ) {}

  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined
    const server = createServer((client) => proxy?.accept(client))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => resolve())
    })
    const address = server.address()
    const port = typeof address === 'object' && address ? address.port : 0
    proxy = new TcpProxy(server, port, targetPort, targetHost)
    return proxy
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  get openConnections(): number {
    return this.pipes.size
  }

  cut(): number {
    const n = this.pipes.size
    for (const pipe of this.pipes) this.drop(pipe)
    this.held.length = 0
    this.stats.cuts += n
    return n
  }

  refuse(): void {
    this.mode = 'refuse'
    this.cut()
  }

  stall(): void {
    this.mode = 'stall'
  }

  slow(ms: number): void {
    this.delayMs = ms
  }

  holdRepliesAfter(match: (chunk: Buffer) => boolean): void {
    this.replyTrigger = match
  }

  resume(): void {
    this.mode = 'pass'
    this.delayMs = 0
    this.replyTrigger = undefined
    for (const pipe of this.holding) pipe.holdReplies = false
    this.holding.clear()
    for (const deliver of this.held.splice(0)) deliver()
  }

  async close(): Promise<void> {
    this.cut()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private accept(client: Socket): void {
    if (this.mode === 'refuse') {
      this.stats.refused++
      client.destroy()
      return
    }
    this.stats.connections++
    const upstream = connect(this.targetPort, this.targetHost)
    const pipe: Pipe = { client, upstream, holdReplies: false }
    this.pipes.add(pipe)
    client.setNoDelay(true)
    upstream.setNoDelay(true)
    this.forward(pipe, client, upstream)
    this.forward(pipe, upstream, client)
    const end = () => this.drop(pipe)
    for (const s of [client, upstream]) {
      s.on('error', end)
      s.on('close', end)
    }
  }

  private forward(pipe: Pipe, from: Socket, to: Socket): void {
    let lastAt = 0
    const isRequest = from === pipe.client
    from.on('data', (chunk: Buffer) => {
      this.stats.chunks++
      if (isRequest && this.replyTrigger?.(chunk)) {
        this.replyTrigger = undefined // one shot
        pipe.holdReplies = true
        this.holding.add(pipe)
      }
      if (!isRequest && pipe.holdReplies) return void this.held.push(() => !to.destroyed && to.write(chunk))
      const write = () => {
        if (!to.destroyed) to.write(chunk)
      }
      const send = () => {
        if (this.delayMs <= 0 && lastAt <= Date.now()) return write()
        // Keep the order of chunks when the delay changes: never deliver before the previous chunk.
        lastAt = Math.max(Date.now() + this.delayMs, lastAt)
        setTimeout(write, lastAt - Date.now())
      }
      if (this.mode === 'stall') this.held.push(send)
      else send()
    })
  }

  private drop(pipe: Pipe): void {
    this.holding.delete(pipe)
    if (!this.pipes.delete(pipe)) return
    pipe.client.destroy()
    pipe.upstream.destroy()
  }
}
