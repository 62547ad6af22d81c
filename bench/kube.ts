// Direct calls to a benchmark control plane's API server with its admin token and CA: the set-up
// of the benchmark (namespaces, thousands of ConfigMaps and Users) and path (a) of the table.
import https from 'node:https';
import type { ControlPlaneHandle } from '../src/controlplane/controlplane.js';

export interface KubeAnswer {
  status: number;
  body: any;
}

export class DirectKube {
  readonly agent: https.Agent;

  constructor(readonly cp: ControlPlaneHandle) {
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 64, ca: cp.caPem });
  }

  get headers(): Record<string, string> {
    return { authorization: `Bearer ${this.cp.token}`, accept: 'application/json' };
  }

  request(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<KubeAnswer> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        this.cp.server + path,
        {
          method,
          agent: this.agent,
          headers: {
            ...this.headers,
            ...(payload ? { 'content-type': contentType, 'content-length': String(Buffer.byteLength(payload)) } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              /* not JSON */
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** Sends and insists on one of the expected codes. */
  async expect(method: string, path: string, body: unknown, ok: number[]): Promise<KubeAnswer> {
    const answer = await this.request(method, path, body);
    if (!ok.includes(answer.status))
      throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
    return answer;
  }

  async ensureNamespace(name: string): Promise<void> {
    await this.expect('POST', '/api/v1/namespaces', { metadata: { name } }, [201, 409]);
  }

  /** How many objects a collection holds (one page of size 1 and its remainingItemCount). */
  async count(collectionPath: string): Promise<number> {
    const answer = await this.expect('GET', `${collectionPath}?limit=1`, undefined, [200]);
    return (answer.body.items?.length ?? 0) + (answer.body.metadata?.remainingItemCount ?? 0);
  }

  /** POSTs the objects `from`..`to-1` with `concurrency` requests in flight; existing ones are kept. */
  async createMany(
    collectionPath: string,
    from: number,
    to: number,
    concurrency: number,
    make: (i: number) => unknown,
  ): Promise<void> {
    let next = from;
    const worker = async () => {
      while (next < to) {
        const i = next++;
        await this.expect('POST', collectionPath, make(i), [201, 409]);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }

  close(): void {
    this.agent.destroy();
  }
}
