/**
 * A local HTTP endpoint that answers SSM GetParameter (AWS JSON 1.1) from a table of parameters, for the
 * real SSMClient (AWS_ENDPOINT_URL_SSM). A missing name gets ParameterNotFound, as from AWS, with a
 * request id; `failWith` makes every call fail with a given AWS error.
 */
import { createServer, type Server } from 'node:http'
import { listenLocally } from './local-aws.js'

export interface SsmParameter {
  value: string
  type?: 'SecureString' | 'String'
}

export interface SsmEndpoint {
  url: string
  /** Every decoded request: its X-Amz-Target and body. */
  requests: { target: string | undefined; body: { Name?: string; WithDecryption?: boolean } }[]
  parameters: Map<string, SsmParameter>
  failWith(error: { status: number; type: string; message: string } | undefined): void
  close(): Promise<void>
}

export const SSM_REQUEST_ID = 'ssm-test-request-id'

export async function startSsmEndpoint(parameters: Record<string, SsmParameter> = {}): Promise<SsmEndpoint> {
  const table = new Map(Object.entries(parameters))
  const requests: SsmEndpoint['requests'] = []
  let failure: { status: number; type: string; message: string } | undefined
  const reply = (res: import('node:http').ServerResponse, status: number, body: object) => {
    res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-requestid': SSM_REQUEST_ID })
    res.end(JSON.stringify(body))
  }
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const target = req.headers['x-amz-target']
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { Name?: string; WithDecryption?: boolean }
      requests.push({ target: Array.isArray(target) ? target[0] : target, body })
      if (failure) return reply(res, failure.status, { __type: failure.type, message: failure.message })
      const parameter = body.Name === undefined ? undefined : table.get(body.Name)
      if (!parameter) return reply(res, 400, { __type: 'ParameterNotFound', message: '' })
      const type = parameter.type ?? 'SecureString'
      return reply(res, 200, { Parameter: { Name: body.Name, Type: type, Value: parameter.value, Version: 1, DataType: 'text' } })
    })
  })
  const { port, close } = await listenLocally(server)
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    parameters: table,
    failWith: (error) => {
      failure = error
    },
    close,
  }
}
