/**
 * TLS test kit: a throwaway CA and server certificate made with openssl (by default CN 127.0.0.1, SAN
 * IP:127.0.0.1 and DNS:localhost; `names` makes one that names only hosts, as a managed Redis's does), a
 * private redis-server listening only on a TLS port with an ACL user, and child
 * processes (a Worker, and a client that runs Queue.add / sweep() / the Lambda handler) that trust the CA
 * through NODE_EXTRA_CA_CERTS and whose stdout and stderr are captured, so the test can search them.
 */
import { type ChildProcess, execFile, fork } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { spawnRedisServer } from '../../cli/support/local-redis.js'
import { killAndWait } from '../../cli/support/worker-process.js'
import { freePort } from './redis-server.js'
import { waitFor } from './wait.js'

const run = promisify(execFile)
/** The held worker the demo and test/helpers/worker-process.ts use (IPC: ready, active, completed, error, ...). */
const WORKER_FIXTURE = fileURLToPath(new URL('../../cli/support/held-worker.ts', import.meta.url))
const CLIENT_FIXTURE = fileURLToPath(new URL('./tls-handler-process.ts', import.meta.url))

export interface Certs {
  dir: string
  ca: string
  cert: string
  key: string
}

/** The certificate's subjectAltName entries: `DNS:localhost` alone is a certificate for a name, not an address. */
export async function makeCerts(dir: string, names = ['IP:127.0.0.1', 'DNS:localhost']): Promise<Certs> {
  const p = (f: string) => path.join(dir, f)
  const cn = (names[0] ?? 'DNS:localhost').replace(/^\w+:/, '')
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  await run('openssl', ['req', '-x509', ...ec, '-keyout', p('ca.key'), '-out', p('ca.pem'), '-days', '2', '-subj', '/CN=EchoMQ test CA'])
  await run('openssl', ['req', ...ec, '-keyout', p('server.key'), '-out', p('server.csr'), '-subj', `/CN=${cn}`])
  writeFileSync(
    p('server.ext'),
    // clientAuth too: the nodes of a TLS cluster present it to each other on the cluster bus.
    `subjectAltName=${names.join(',')}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n`,
  )
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    p('server.csr'),
    '-CA',
    p('ca.pem'),
    '-CAkey',
    p('ca.key'),
    '-CAcreateserial',
    '-out',
    p('server.pem'),
    '-days',
    '2',
    '-extfile',
    p('server.ext'),
  ])
  return { dir, ca: p('ca.pem'), cert: p('server.pem'), key: p('server.key') }
}

export interface TlsRedis {
  tlsPort: number
  certs: Certs
  /** The ACL user EchoMQ connects as, and its password (random per run). */
  user: string
  password: string
  /** rediss://user:password@127.0.0.1:tlsPort */
  url: string
  /** rediss:// with a wrong password (unrelated to the right one) for the same user. */
  wrongUrl: string
  wrongPassword: string
  /** The default user's password (the admin client only). */
  adminPassword: string
  /** Admin client (default user, TLS, trusts the CA), closed in stop(). */
  admin: Redis
  stop(): Promise<void>
}

export async function startTlsRedis(): Promise<TlsRedis> {
  const dir = mkdtempSync(path.join(tmpdir(), 'emq-tls-'))
  let child: ChildProcess | undefined
  let admin: Redis | undefined
  const stop = async () => {
    admin?.disconnect()
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child?.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    const certs = await makeCerts(dir)
    const tlsPort = await freePort()
    const adminPassword = `admin-${randomBytes(8).toString('hex')}`
    const password = `emqpw-${randomBytes(8).toString('hex')}`
    const wrongPassword = `badpw-${randomBytes(8).toString('hex')}`
    child = spawnRedisServer(0, dir, [
      '--tls-port',
      String(tlsPort),
      '--tls-cert-file',
      certs.cert,
      '--tls-key-file',
      certs.key,
      '--tls-ca-cert-file',
      certs.ca,
      '--tls-auth-clients',
      'no',
      '--requirepass',
      adminPassword,
      '--maxmemory-policy',
      'noeviction',
    ])
    admin = new Redis({
      host: '127.0.0.1',
      port: tlsPort,
      password: adminPassword,
      tls: { ca: readFileSync(certs.ca) },
      maxRetriesPerRequest: 1,
      retryStrategy: () => 50,
    })
    admin.on('error', () => undefined)
    const a = admin
    await waitFor(async () => (await a.ping()) === 'PONG', { timeoutMs: 10_000, what: `redis-server on TLS port ${tlsPort}` })
    await a.call('ACL', 'SETUSER', 'emq', 'reset', 'on', `>${password}`, '~*', '&*', '+@all')
    return {
      tlsPort,
      certs,
      user: 'emq',
      password,
      url: `rediss://emq:${password}@127.0.0.1:${tlsPort}`,
      wrongUrl: `rediss://emq:${wrongPassword}@127.0.0.1:${tlsPort}`,
      wrongPassword,
      adminPassword,
      admin: a,
      stop,
    }
  } catch (err) {
    await stop()
    throw err
  }
}

interface Message {
  type?: string
  id?: string
  message?: string
  seq?: number
  ok?: boolean
  result?: unknown
  error?: { name?: string; code?: string; message?: string; inspected?: string }
}

export interface Child {
  child: ChildProcess
  messages: Message[]
  /** Ids of the jobs a worker child has taken. */
  active(): string[]
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string
  waitForMessage(type: string, id?: string, timeoutMs?: number): Promise<Message>
  /** Sends a request to a tls-handler-process child and waits for its answer. */
  request(req: Record<string, unknown>, timeoutMs?: number): Promise<Message>
  send(message: object): void
  kill(signal: NodeJS.Signals): void
  stop(): Promise<void>
}

let seq = 0

async function forkCaptured(file: string, env: Record<string, string>, ready: (m: Message) => boolean): Promise<Child> {
  const child = fork(file, [], { execArgv: ['--import', 'tsx'], env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] })
  const chunks: string[] = []
  child.stdout?.on('data', (d: Buffer) => chunks.push(d.toString('utf8')))
  child.stderr?.on('data', (d: Buffer) => chunks.push(d.toString('utf8')))
  const messages: Message[] = []
  child.on('message', (m: Message) => messages.push(m))
  const handle: Child = {
    child,
    messages,
    active: () => messages.filter((m) => m.type === 'active').map((m) => m.id ?? ''),
    output: () => chunks.join(''),
    waitForMessage: (type, id, timeoutMs = 15_000) =>
      waitFor(() => messages.find((m) => m.type === type && (id === undefined || m.id === id)), {
        timeoutMs,
        what: `child message ${type} ${id ?? ''}`,
      }),
    async request(req, timeoutMs = 20_000) {
      const n = ++seq
      child.send({ ...req, seq: n })
      return waitFor(() => messages.find((m) => m.seq === n), { timeoutMs, what: `answer to ${JSON.stringify(req)}` })
    },
    send: (message) => child.send(message),
    kill: (signal) => child.kill(signal),
    stop: () => killAndWait(child),
  }
  try {
    await waitFor(() => messages.find(ready), { timeoutMs: 20_000, what: `${path.basename(file)} to start` })
  } catch (err) {
    await handle.stop()
    throw new Error(`${(err as Error).message}; output: ${handle.output()}`)
  }
  return handle
}

/** cli/support/held-worker.ts (IPC: ready, active, completed, error, ...) with its output captured. */
export function spawnTlsWorker(env: Record<string, string>): Promise<Child> {
  return forkCaptured(WORKER_FIXTURE, env, (m) => m.type === 'ready')
}

/** test/helpers/tls-handler-process.ts: Queue.add, sweep() and the handler through REDIS_URL. */
export function spawnTlsClient(env: Record<string, string>): Promise<Child> {
  return forkCaptured(CLIENT_FIXTURE, env, (m) => m.seq === 0)
}
