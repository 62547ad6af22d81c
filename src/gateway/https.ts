// The https listener beside the http one (`--tls-port`): kubectl sends a bearer token only over
// https, so `kubectl` through kiteline needs it when no TLS front end (an ingress) is in front.
// TLS is terminated here and each decrypted connection is handed to the same Node HTTP server
// the http listener feeds: one Fastify app, one set of routes, upgrades, timeouts and client
// addresses for both (Fastify sees `request.protocol === 'https'`, so session cookies get Secure).
// The certificate is the configured one, or a self-signed one made at start-up for loopback, the
// listening address and this host's name; kubeconfigs then embed it as their CA.
import type { Server as HttpServer } from 'node:http';
import { hostname } from 'node:os';
import { isIP } from 'node:net';
import { readFileSync } from 'node:fs';
import { createServer, type TLSSocket } from 'node:tls';
import type { TlsConfig } from '../config.js';
import { selfSignedServingCert } from '../controlplane/pki.js';

/** What kubeconfigs need to point at the https listener. */
export interface HttpsEndpoint {
  /** The listening port (known once listening). */
  port: number;
  /** PEM that clients must trust: the self-signed certificate; undefined for a configured one. */
  trustPem: string | undefined;
}

export interface HttpsListener {
  endpoint: HttpsEndpoint;
  listen(host: string): Promise<string>;
  close(): Promise<void>;
}

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '']);

export function httpsListener(httpServer: HttpServer, tls: TlsConfig, listenHost: string): HttpsListener {
  const { cert, key, selfSigned } = tlsMaterial(tls, listenHost);
  const endpoint: HttpsEndpoint = { port: tls.port, trustPem: selfSigned ? cert : undefined };
  const server = createServer({ cert, key, ALPNProtocols: ['http/1.1'] });
  server.on('secureConnection', (socket: TLSSocket) => httpServer.emit('connection', socket));
  // A client that fails the handshake (a port scan, plain http on this port) is simply dropped.
  server.on('tlsClientError', (_err, socket) => socket.destroy());
  return {
    endpoint,
    listen: (host) =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(tls.port, host, () => {
          const address = server.address();
          endpoint.port = typeof address === 'object' && address ? address.port : tls.port;
          resolve(`https://${isIP(host) === 6 ? `[${host}]` : host}:${endpoint.port}`);
        });
      }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function tlsMaterial(tls: TlsConfig, listenHost: string): { cert: string; key: string; selfSigned: boolean } {
  if (tls.certFile && tls.keyFile)
    return { cert: readFileSync(tls.certFile, 'utf8'), key: readFileSync(tls.keyFile, 'utf8'), selfSigned: false };
  const ips = new Set(['127.0.0.1', '::1']);
  if (isIP(listenHost) && !WILDCARD_HOSTS.has(listenHost)) ips.add(listenHost);
  const { certPem, keyPem } = selfSignedServingCert([...ips], ['localhost', hostname()]);
  return { cert: certPem, key: keyPem, selfSigned: true };
}
