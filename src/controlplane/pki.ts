// The control plane's own certificate authority and the certificates it signs, made with the
// openssl command (Node can verify X.509 but not issue it); also the gateway's self-signed https
// certificate when it is given none.
//
// One CA per control plane directory, kept forever: kubeconfigs trust it, so the API server's
// serving certificate can be re-issued (e.g. when a node adds an address) without invalidating
// them. The same CA signs the client certificates of the node's components (each its own
// identity, none the admin's), and the API server accepts them through --client-ca-file.
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface CertFiles {
  cert: string;
  key: string;
}

export interface ClientIdentity {
  /** The user name the API server sees (certificate CN). */
  user: string;
  /** Groups (certificate O entries). */
  groups?: string[];
}

const DAYS = '3650';

function openssl(args: string[]): void {
  const res = spawnSync('openssl', args, { encoding: 'utf8' });
  if (res.error) throw new Error(`openssl is needed to make the control plane's certificates: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`openssl ${args[0]} failed: ${res.stderr.trim()}`);
}

/** Creates DIR/ca.crt and ca.key once. */
export function ensureCa(pkiDir: string, name: string): CertFiles {
  const ca = { cert: join(pkiDir, 'ca.crt'), key: join(pkiDir, 'ca.key') };
  if (existsSync(ca.cert) && existsSync(ca.key)) return ca;
  openssl([
    'req',
    '-x509',
    '-new',
    '-nodes',
    '-newkey',
    'rsa:2048',
    '-sha256',
    '-days',
    DAYS,
    '-keyout',
    ca.key,
    '-out',
    ca.cert,
    '-subj',
    `/CN=kiteline-${name}-ca`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return ca;
}

/** Is the certificate at path signed by ca and does its subjectAltName read exactly `sans`? */
function current(path: string, ca: CertFiles, subject: string, sans: string | undefined): boolean {
  if (!existsSync(path)) return false;
  const cert = new X509Certificate(readFileSync(path));
  const issuer = new X509Certificate(readFileSync(ca.cert));
  return (
    cert.checkIssued(issuer) &&
    cert.verify(issuer.publicKey) &&
    cert.subject === subject &&
    cert.subjectAltName === sans
  );
}

function issue(ca: CertFiles, files: CertFiles, subj: string, extensions: string[]): void {
  rmSync(files.cert, { force: true });
  openssl([
    'req',
    '-x509',
    '-new',
    '-nodes',
    '-newkey',
    'rsa:2048',
    '-sha256',
    '-days',
    DAYS,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-keyout',
    files.key,
    '-out',
    files.cert,
    '-subj',
    subj,
    '-addext',
    'basicConstraints=critical,CA:FALSE',
    '-addext',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    ...extensions.flatMap((e) => ['-addext', e]),
  ]);
}

/**
 * The API server's serving certificate for these IP addresses and DNS names; re-issued when the
 * set changes (a node's link address comes or goes) or the CA is not its issuer.
 */
export function ensureServingCert(pkiDir: string, ca: CertFiles, ips: string[], dnsNames: string[]): CertFiles {
  const files = { cert: join(pkiDir, 'apiserver-serving.crt'), key: join(pkiDir, 'apiserver-serving.key') };
  // Node prints subjectAltName in this form and order: DNS names first, then IP addresses.
  const sans = [...dnsNames.map((d) => `DNS:${d}`), ...ips.map((ip) => `IP Address:${ip}`)].join(', ');
  if (!current(files.cert, ca, 'CN=kube-apiserver', sans)) {
    issue(ca, files, '/CN=kube-apiserver', [
      'extendedKeyUsage=serverAuth',
      `subjectAltName=${[...dnsNames.map((d) => `DNS:${d}`), ...ips.map((ip) => `IP:${ip}`)].join(',')}`,
    ]);
  }
  return files;
}

/** A client certificate for identity, stored as DIR/<file>.crt and .key. */
export function ensureClientCert(pkiDir: string, ca: CertFiles, file: string, identity: ClientIdentity): CertFiles {
  const files = { cert: join(pkiDir, `${file}.crt`), key: join(pkiDir, `${file}.key`) };
  const groups = identity.groups ?? [];
  // X509Certificate.subject lists one attribute per line, in the order of the subject string.
  const subject = [...groups.map((g) => `O=${g}`), `CN=${identity.user}`].join('\n');
  if (!current(files.cert, ca, subject, undefined)) {
    issue(ca, files, [...groups.map((g) => `/O=${g}`), `/CN=${identity.user}`].join(''), [
      'extendedKeyUsage=clientAuth',
    ]);
  }
  return files;
}

/**
 * A self-signed serving certificate (its own CA) for these addresses, made in a scratch
 * directory and returned as PEM: for a listener whose clients are told to trust exactly it
 * (`kiteline serve --tls-port` without a certificate; kubeconfigs embed it).
 */
export function selfSignedServingCert(ips: string[], dnsNames: string[]): { certPem: string; keyPem: string } {
  const dir = mkdtempSync(join(tmpdir(), 'kiteline-tls-'));
  try {
    const files = { cert: join(dir, 'tls.crt'), key: join(dir, 'tls.key') };
    openssl([
      'req',
      '-x509',
      '-new',
      '-nodes',
      '-newkey',
      'rsa:2048',
      '-sha256',
      '-days',
      DAYS,
      '-keyout',
      files.key,
      '-out',
      files.cert,
      '-subj',
      '/CN=kiteline',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign',
      '-addext',
      'extendedKeyUsage=serverAuth',
      '-addext',
      `subjectAltName=${[...dnsNames.map((d) => `DNS:${d}`), ...ips.map((ip) => `IP:${ip}`)].join(',')}`,
    ]);
    return { certPem: readFileSync(files.cert, 'utf8'), keyPem: readFileSync(files.key, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
