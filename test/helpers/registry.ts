// Debian's docker-registry (the distribution project's registry) for the tests: a child process on
// a loopback port with a generated config (filesystem storage in a temporary folder), anonymous,
// behind htpasswd (Basic) or behind token auth, over http or https. Images get in by real pushes:
// skopeo copies the node's pause image from its OCI archive, and more tags are the same manifest
// PUT under other names through the registry's HTTP API. The token server for token auth is the
// test's own (startTokenIssuer): it signs RS256 JWTs with a certificate of a CA the registry
// trusts (rootcertbundle), carrying it in the x5c header, as the distribution token spec asks.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { createPrivateKey, randomBytes, sign, X509Certificate } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureCa, ensureServingCert, type CertFiles } from '../../src/controlplane/pki.js';
import { ensureImages } from '../../src/controlplane/images.js';
import { freePort } from '../../src/controlplane/ports.js';
import { eventually } from './eventually.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface RegistryOptions {
  /** Serve https with a certificate of `ca`. */
  ca?: CertFiles;
  /** Basic auth: these users (htpasswd, bcrypt). */
  users?: Record<string, string>;
  /** Token auth: the issuer's realm, and the CA whose certificates sign its tokens. */
  token?: { realm: string; ca: CertFiles };
}

export interface TestRegistry {
  /** host:port, as an image names it. */
  host: string;
  port: number;
  url: string;
  /** A directory holding ca.crt, for skopeo's --dest-cert-dir (https only). */
  certDir?: string;
}

/** Whether something accepts connections on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export const TOKEN_SERVICE = 'kiteline-test-registry';
const TOKEN_ISSUER = 'kiteline-test-issuer';

/** Starts docker-registry; stopped (and its storage removed) at teardown. */
export async function startRegistry(t: Teardown, options: RegistryOptions = {}): Promise<TestRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'kiteline-registry-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const config = [
    'version: 0.1',
    'log:',
    '  level: warn',
    '  accesslog:',
    '    disabled: true',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${join(dir, 'data')}`,
    'http:',
    `  addr: 127.0.0.1:${port}`,
  ];
  let certDir: string | undefined;
  if (options.ca) {
    mkdirSync(join(dir, 'pki'));
    const serving = ensureServingCert(join(dir, 'pki'), options.ca, ['127.0.0.1'], ['localhost']);
    config.push('  tls:', `    certificate: ${serving.cert}`, `    key: ${serving.key}`);
    certDir = join(dir, 'certs.d');
    mkdirSync(certDir);
    copyFileSync(options.ca.cert, join(certDir, 'ca.crt'));
  }
  if (options.users) {
    const lines = Object.entries(options.users).map(([user, password]) => {
      const res = spawnSync('htpasswd', ['-nbB', user, password], { encoding: 'utf8' });
      if (res.status !== 0) throw new Error(`htpasswd (apache2-utils) failed: ${res.stderr}`);
      return res.stdout.trim();
    });
    writeFileSync(join(dir, 'htpasswd'), `${lines.join('\n')}\n`);
    config.push('auth:', '  htpasswd:', '    realm: kiteline-test', `    path: ${join(dir, 'htpasswd')}`);
  }
  if (options.token) {
    config.push(
      'auth:',
      '  token:',
      `    realm: ${options.token.realm}`,
      `    service: ${TOKEN_SERVICE}`,
      `    issuer: ${TOKEN_ISSUER}`,
      `    rootcertbundle: ${options.token.ca.cert}`,
    );
  }
  writeFileSync(join(dir, 'config.yml'), `${config.join('\n')}\n`);
  const child = spawn('docker-registry', ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGTERM');
    return exited;
  });
  const url = `${options.ca ? 'https' : 'http'}://127.0.0.1:${port}`;
  await eventually(
    'docker-registry to listen',
    async () => {
      if (child.exitCode !== null) throw new Error(`docker-registry exited: ${stderr}`);
      return listening(port);
    },
    20_000,
    100,
  ).catch((err: Error) => {
    throw new Error(`${err.message}: ${stderr}`);
  });
  return { host: `127.0.0.1:${port}`, port, url, ...(certDir ? { certDir } : {}) };
}

/** Runs a command without blocking the event loop (the token issuer answers in this process). */
function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${command} ${args.slice(0, 3).join(' ')}: ${stderr || err.message}`)) : resolve(stdout),
    );
  });
}

/** Pushes the node's pause image to `repository` under each tag, with skopeo (as `credentials`). */
export async function pushImage(
  registry: TestRegistry,
  repository: string,
  tags: string[],
  credentials?: { username: string; password: string },
): Promise<void> {
  const pause = ensureImages().archives[0].archive;
  for (const tag of tags) {
    const args = ['copy', '--quiet', `oci-archive:${pause}`, `docker://${registry.host}/${repository}:${tag}`];
    args.push(...(registry.certDir ? ['--dest-cert-dir', registry.certDir] : ['--dest-tls-verify=false']));
    if (credentials) args.push('--dest-creds', `${credentials.username}:${credentials.password}`);
    await run('skopeo', args);
  }
}

/**
 * Tags an anonymous http registry's `repository:from` with many more tags: its manifest PUT again
 * under each name through the HTTP API, 16 at a time.
 */
export async function addTags(registry: TestRegistry, repository: string, from: string, tags: string[]): Promise<void> {
  const manifestUrl = (tag: string) => `${registry.url}/v2/${repository}/manifests/${tag}`;
  const got = await fetch(manifestUrl(from), { headers: { accept: OCI_MANIFEST } });
  if (!got.ok) throw new Error(`GET ${manifestUrl(from)}: ${got.status}`);
  const contentType = got.headers.get('content-type') ?? OCI_MANIFEST;
  const manifest = await got.text();
  const queue = [...tags];
  const put = async () => {
    for (let tag = queue.shift(); tag !== undefined; tag = queue.shift()) {
      const res = await fetch(manifestUrl(tag), {
        method: 'PUT',
        headers: { 'content-type': contentType },
        body: manifest,
      });
      await res.arrayBuffer();
      if (res.status !== 201) throw new Error(`PUT ${manifestUrl(tag)}: ${res.status}`);
    }
  };
  await Promise.all(Array.from({ length: 16 }, put));
}

const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';

export interface TokenIssuer {
  realm: string;
  port: number;
  /** What each token request carried: the scopes asked and the Basic user, if any. */
  requests: Array<{ scopes: string[]; user: string | undefined }>;
}

/**
 * A token server for a token-auth registry: anonymous callers get `pull` on repositories under
 * public/, the given users every action they ask for anywhere.
 */
export async function startTokenIssuer(
  t: Teardown,
  ca: CertFiles,
  users: Record<string, string>,
): Promise<TokenIssuer> {
  const dir = mkdtempSync(join(tmpdir(), 'kiteline-issuer-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const signing = ensureServingCert(dir, ca, ['127.0.0.1'], ['localhost']);
  const key = createPrivateKey(readFileSync(signing.key));
  const x5c = [new X509Certificate(readFileSync(signing.cert)).raw.toString('base64')];
  const requests: TokenIssuer['requests'] = [];
  const b64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

  const userOf = (req: IncomingMessage): string | undefined => {
    const header = req.headers.authorization ?? '';
    if (!header.startsWith('Basic ')) return undefined;
    const [user = '', password] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':');
    return users[user] !== undefined && users[user] === password ? user : `bad:${user}`;
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://issuer');
    const scopes = url.searchParams.getAll('scope');
    const user = userOf(req);
    requests.push({ scopes, user });
    if (user?.startsWith('bad:')) {
      res.writeHead(401).end();
      return;
    }
    const access = scopes.flatMap((scope) => {
      const [type, name = '', actions = ''] = scope.split(':');
      if (type !== 'repository') return [];
      const granted = user ? actions.split(',') : name.startsWith('public/') ? ['pull'] : [];
      return [{ type, name, actions: granted.filter((action) => actions.split(',').includes(action)) }];
    });
    const now = Math.floor(Date.now() / 1000);
    const header = b64url({ typ: 'JWT', alg: 'RS256', x5c });
    const claims = b64url({
      iss: TOKEN_ISSUER,
      sub: user ?? '',
      aud: url.searchParams.get('service') ?? '',
      exp: now + 300,
      nbf: now - 10,
      iat: now,
      jti: randomBytes(8).toString('hex'),
      access,
    });
    const signature = sign('sha256', Buffer.from(`${header}.${claims}`), key).toString('base64url');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ token: `${header}.${claims}.${signature}`, expires_in: 300 }));
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { realm: `http://127.0.0.1:${port}/token`, port, requests };
}

/** A CA for the registries' certificates and the issuer's tokens. */
export function testCa(t: Teardown): CertFiles {
  const dir = mkdtempSync(join(tmpdir(), 'kiteline-registry-ca-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return ensureCa(dir, 'registry');
}
