// A minimal HTTP(S) GET for readiness checks against etcd and the API server, with no client
// library: the control plane must come up before anything else of kiteline can talk to it.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export function get(url: string, opts: { ca?: string; token?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolvePromise, reject) => {
    const u = new URL(url);
    const requester = u.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = requester(
      u,
      {
        method: 'GET',
        ca: opts.ca,
        headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
        timeout: 3000,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}
