/**
 * Why a connection EchoMQ opened does not come up, in words that say what to fix. ioredis reports a TLS
 * client on a plain port, a plain client on a TLS port and a filtered port alike (a timeout, a closed
 * connection), and a cluster client hides every node's error behind "Failed to refresh slots cache". So,
 * only after a failure, `diagnose` looks for itself, within `timeoutMs` in all: a TCP connection (none:
 * the port is filtered, or the host unreachable from here), then the TLS handshake the client would make
 * (a certificate error is named with its code and its fix), then what the port speaks (a plain Redis
 * answers PING; a TLS server completes a handshake). Errors that name their cause (a certificate refused,
 * DNS, a refused connection) are explained without a probe. Nothing is sent to a Redis but PING.
 */
import net from 'node:net'
import tls from 'node:tls'
import { NOT_REDIS } from '../errors.js'

export interface Endpoint {
  host: string
  port: number
  /** The client's TLS options; undefined for a plain (redis://) connection. */
  tls: tls.ConnectionOptions | undefined
}

/** A connection failure explained: `message` is what happened, `hint` what to fix. */
export class ConnectionProblem extends Error {
  constructor(
    what: string,
    readonly hint: string,
  ) {
    super(`${what}: ${hint}`)
    this.name = 'ConnectionProblem'
  }
}

/** The most a diagnosis takes, all probes together. */
export const DIAGNOSIS_TIMEOUT_MS = 2_000

const CA_HINT =
  'the server certificate is not signed by a CA this process trusts: give the CA with NODE_EXTRA_CA_CERTS=<ca.pem>, or ' +
  "tls: { ca } in ioredis options (Redis Cloud's CA is downloaded from its console; docs/connections.md)"

/** Node's codes for a certificate it refused, and what to do about each. */
const CERTIFICATE_HINTS: Record<string, (host: string) => string> = {
  ERR_TLS_CERT_ALTNAME_INVALID: (host) =>
    `the certificate does not name ${host}: connect by a name the certificate holds (the endpoint's DNS name, not an IP ` +
    'address); on a cluster the nodes must announce host names too (cluster-preferred-endpoint-type hostname), as ' +
    'ElastiCache does with in-transit encryption',
  SELF_SIGNED_CERT_IN_CHAIN: () => CA_HINT,
  DEPTH_ZERO_SELF_SIGNED_CERT: () => CA_HINT,
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: () => CA_HINT,
  UNABLE_TO_GET_ISSUER_CERT: () => CA_HINT,
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: () => CA_HINT,
  CERT_SIGNATURE_FAILURE: () => CA_HINT,
  CERT_HAS_EXPIRED: () => "the server's certificate has expired: renew it on the server (or check this machine's clock)",
  CERT_NOT_YET_VALID: () => "the server's certificate is not valid yet: check this machine's clock",
}

function certificateProblem(err: NodeJS.ErrnoException, host: string): ConnectionProblem | undefined {
  const hint = err.code === undefined ? undefined : CERTIFICATE_HINTS[err.code]
  return hint && new ConnectionProblem(`TLS: ${err.message} (${err.code})`, hint(host))
}

/** A failure whose error says enough, explained without a probe; undefined when only a probe can tell. */
export function explain(err: Error, { host, port }: Endpoint): ConnectionProblem | undefined {
  const e = err as NodeJS.ErrnoException
  const tlsError = certificateProblem(e, host)
  if (tlsError) return tlsError
  if (e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN') {
    return new ConnectionProblem(e.message, 'check the host name; a private endpoint (ElastiCache, MemoryDB) resolves only inside its VPC')
  }
  if (e.code === 'ECONNREFUSED')
    return new ConnectionProblem(e.message, `nothing listens on port ${port} of ${host}: check the host and port`)
  if (e.code === 'EHOSTUNREACH' || e.code === 'ENETUNREACH') return new ConnectionProblem(e.message, unreachable(port))
  return undefined
}

type Outcome = { ok: true; reply?: string } | { ok: false; err?: NodeJS.ErrnoException }

/** One probe on a socket: `ok` on `ready` (or on the first reply to `send`), a failure on error, close, abort or the deadline. */
function probe(open: () => net.Socket, ready: string, deadline: number, signal?: AbortSignal, send?: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = open()
    const done = (outcome: Outcome) => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', abort)
      socket.destroy()
      resolve(outcome)
    }
    const abort = () => done({ ok: false })
    const timer = setTimeout(abort, Math.max(0, deadline - performance.now()))
    signal?.addEventListener('abort', abort)
    socket.once(ready, () => (send === undefined ? done({ ok: true }) : socket.write(send)))
    if (send !== undefined) socket.once('data', (data: Buffer) => done({ ok: true, reply: data.toString('latin1') }))
    socket.once('error', (err: NodeJS.ErrnoException) => done({ ok: false, err }))
    socket.once('close', abort)
  })
}

const tcp = ({ host, port }: Endpoint, deadline: number) => probe(() => net.connect({ host, port }), 'connect', deadline)
const handshake = ({ host, port }: Endpoint, options: tls.ConnectionOptions, deadline: number, signal: AbortSignal) =>
  probe(() => tls.connect({ host, port, ...options }), 'secureConnect', deadline, signal)
/** A plain Redis answers PING with +PONG, or -NOAUTH / -ERR: either way, RESP. */
async function speaksPlainRedis({ host, port }: Endpoint, deadline: number): Promise<boolean> {
  const outcome = await probe(() => net.connect({ host, port }), 'connect', deadline, undefined, 'PING\r\n')
  return outcome.ok && /^[+-]/.test(outcome.reply ?? '')
}

/** What `err`, a failure to connect to `target`, means; undefined when the probes find nothing wrong. */
export async function diagnose(target: Endpoint, err: Error, timeoutMs = DIAGNOSIS_TIMEOUT_MS): Promise<ConnectionProblem | undefined> {
  const known = explain(err, target)
  if (known) return known
  const { host, port } = target
  const deadline = performance.now() + timeoutMs
  const connected = await tcp(target, deadline)
  if (!connected.ok) {
    if (connected.err) return explain(connected.err, target)
    return new ConnectionProblem(`no TCP connection to ${host}:${port} within ${timeoutMs} ms`, unreachable(port))
  }
  // Both at once: a plain Redis never completes a handshake (it may wait for more of it until the deadline),
  // and a TLS server drops a PING at once.
  const stop = new AbortController()
  const secured = handshake(target, target.tls ?? { rejectUnauthorized: false }, deadline, stop.signal)
  const plain = await speaksPlainRedis(target, deadline)
  if (plain) stop.abort()
  return target.tls
    ? tlsTarget(target, err, plain, await secured)
    : plain
      ? undefined
      : (await secured).ok
        ? speaksTls(target)
        : notRedis(target)
}

function tlsTarget(target: Endpoint, err: Error, plain: boolean, secured: Outcome): ConnectionProblem | undefined {
  const { host, port } = target
  if (plain) {
    return new ConnectionProblem(
      `${host}:${port} speaks plain Redis, not TLS`,
      'use a redis:// URL (no TLS) for this port, or the port where the server accepts TLS',
    )
  }
  if (secured.ok) return NOT_REDIS.test(err.message) ? notRedis(target) : undefined
  return (
    (secured.err && certificateProblem(secured.err, host)) ??
    new ConnectionProblem(`no TLS handshake with ${host}:${port}`, 'check that this port is the TLS port of a Redis')
  )
}

const speaksTls = ({ host, port }: Endpoint) =>
  new ConnectionProblem(`${host}:${port} speaks TLS`, 'use a rediss:// URL (TLS) for this port')
const unreachable = (port: number) =>
  `the port is filtered or the host unreachable from here: the security group or firewall must let this client in on port ${port}, ` +
  'and the client must run where it can reach Redis (ElastiCache and MemoryDB have no public endpoint: a Lambda needs ' +
  "the Redis VPC's subnets); check the port too"

const notRedis = ({ host, port }: Endpoint) =>
  new ConnectionProblem(`${host}:${port} accepts connections but does not answer as Redis does`, 'check the host and port')
