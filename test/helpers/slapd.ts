// OpenLDAP's slapd (Debian's `slapd` package) for the tests: a directory in a temporary folder with
// a generated slapd.conf (mdb database, StartTLS with a certificate of a CA made here), seeded with
// slapadd, run as a child process on a loopback port, stopped at teardown.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'ldapts';
import { ensureCa, ensureServingCert } from '../../src/controlplane/pki.js';
import { freePort } from '../../src/controlplane/ports.js';
import { kubectl } from './clusters.js';
import { eventually } from './eventually.js';

export const BASE = 'dc=example,dc=org';
export const ROOT_DN = `cn=admin,${BASE}`;
export const SERVICE_DN = `cn=kiteline,ou=services,${BASE}`;
export const SERVICE_PASSWORD = 'service-password-1';

export interface DirectoryUser {
  uid: string;
  password: string;
  cn: string;
}

export interface TestDirectory {
  /** ldap:// (StartTLS offered) and ldaps:// on loopback ports. */
  url: string;
  ldapsUrl: string;
  /** PEM of the CA that signed slapd's certificate. */
  caFile: string;
  /** Another CA, which did not. */
  otherCaFile: string;
  /** A client bound as the directory's root (to change users and groups). */
  admin(): Promise<Client>;
  close(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export function userDn(uid: string): string {
  return `uid=${uid},ou=people,${BASE}`;
}

export function groupDn(cn: string): string {
  return `cn=${cn},ou=groups,${BASE}`;
}

/**
 * The KITELINE_LDAP_* of a gateway signing in against `directory`: StartTLS with its CA (or the CA
 * file given), users and groups under BASE.
 */
export function directoryEnv(directory: TestDirectory, caFile = directory.caFile): Record<string, string> {
  return {
    KITELINE_LDAP_URL: directory.url,
    KITELINE_LDAP_START_TLS: 'true',
    KITELINE_LDAP_CA_FILE: caFile,
    KITELINE_LDAP_BIND_DN: SERVICE_DN,
    KITELINE_LDAP_USER_BASE: `ou=people,${BASE}`,
    KITELINE_LDAP_GROUP_BASE: `ou=groups,${BASE}`,
  };
}

/** The service account's password in the environment's Secret (kiteline-ldap-bind) of `namespace`. */
export function storeBindPassword(kubeconfig: string, namespace: string): void {
  const res = kubectl(kubeconfig, [
    ...['-n', namespace, 'create', 'secret', 'generic', 'kiteline-ldap-bind'],
    `--from-literal=password=${SERVICE_PASSWORD}`,
  ]);
  if (res.status !== 0) throw new Error(`kubectl create secret: ${res.stderr}`);
}

/** Starts slapd with these users and groups (group name → member uids). */
export async function startSlapd(
  t: Teardown,
  users: DirectoryUser[],
  groups: Record<string, string[]>,
): Promise<TestDirectory> {
  const dir = mkdtempSync(join(tmpdir(), 'kiteline-slapd-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const data = join(dir, 'data');
  mkdirSync(data);
  const pki = join(dir, 'pki');
  mkdirSync(pki);
  const ca = ensureCa(pki, 'ldap');
  const serving = ensureServingCert(pki, ca, ['127.0.0.1'], ['localhost']);
  const otherPki = join(dir, 'other');
  mkdirSync(otherPki);
  const otherCa = ensureCa(otherPki, 'other');
  const rootPassword = 'root-password-1';
  const conf = join(dir, 'slapd.conf');
  writeFileSync(
    conf,
    [
      'include /etc/ldap/schema/core.schema',
      'include /etc/ldap/schema/cosine.schema',
      'include /etc/ldap/schema/inetorgperson.schema',
      'include /etc/ldap/schema/nis.schema',
      'modulepath /usr/lib/ldap',
      'moduleload back_mdb',
      `pidfile ${join(dir, 'slapd.pid')}`,
      `TLSCACertificateFile ${ca.cert}`,
      `TLSCertificateFile ${serving.cert}`,
      `TLSCertificateKeyFile ${serving.key}`,
      'database mdb',
      `suffix "${BASE}"`,
      `rootdn "${ROOT_DN}"`,
      `rootpw ${rootPassword}`,
      `directory ${data}`,
      'maxsize 104857600',
      // Passwords: only binding with them; the service account reads the rest.
      'access to attrs=userPassword by anonymous auth by * none',
      `access to * by dn.exact="${SERVICE_DN}" read by self read by * none`,
      '',
    ].join('\n'),
  );
  const entries = [
    `dn: ${BASE}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\no: Example\ndc: example`,
    `dn: ou=people,${BASE}\nobjectClass: organizationalUnit\nou: people`,
    `dn: ou=groups,${BASE}\nobjectClass: organizationalUnit\nou: groups`,
    `dn: ou=services,${BASE}\nobjectClass: organizationalUnit\nou: services`,
    `dn: ${SERVICE_DN}\nobjectClass: person\ncn: kiteline\nsn: kiteline\nuserPassword: ${SERVICE_PASSWORD}`,
    ...users.map(
      (u) =>
        `dn: ${userDn(u.uid)}\nobjectClass: inetOrgPerson\nuid: ${u.uid}\ncn: ${u.cn}\nsn: ${u.uid}\n` +
        `mail: ${u.uid}@example.org\nuserPassword: ${u.password}`,
    ),
    ...Object.entries(groups).map(
      ([cn, members]) =>
        `dn: ${groupDn(cn)}\nobjectClass: groupOfNames\ncn: ${cn}\n` +
        // groupOfNames needs a member: the service account stands in for an empty group.
        (members.length ? members.map((m) => `member: ${userDn(m)}`) : [`member: ${SERVICE_DN}`]).join('\n'),
    ),
  ];
  const seed = join(dir, 'seed.ldif');
  writeFileSync(seed, entries.join('\n\n') + '\n');
  const added = spawnSync('slapadd', ['-f', conf, '-l', seed], { encoding: 'utf8' });
  if (added.status !== 0) throw new Error(`slapadd failed: ${added.stderr}`);

  const port = await freePort();
  const url = `ldap://127.0.0.1:${port}`;
  const ldapsUrl = `ldaps://127.0.0.1:${await freePort()}`;
  const child = spawn('slapd', ['-f', conf, '-h', `${url}/ ${ldapsUrl}/`, '-d', '0'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  t.teardown(close);
  const admin = async () => {
    const client = new Client({ url, timeout: 5000, connectTimeout: 5000 });
    await client.bind(ROOT_DN, rootPassword);
    return client;
  };
  await eventually(
    'slapd to answer',
    async () => {
      if (child.exitCode !== null) throw new Error(`slapd exited: ${stderr}`);
      try {
        await (await admin()).unbind();
        return true;
      } catch {
        return false;
      }
    },
    20_000,
    100,
  );
  return { url, ldapsUrl, caFile: ca.cert, otherCaFile: otherCa.cert, admin, close };
}
