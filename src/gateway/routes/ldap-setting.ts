// GET|PUT /api/v1/admin/ldap-setting[/]: the LDAP directory as Kite's UI configures it (Settings →
// Authentication; admins only), stored as the LDAPSetting `ldap` with the bind password in its
// owned Secret (docs/auth.md, "LDAP"). The bind password is write-only: answers say only whether
// one is stored (`bindPassword` is always ""). While no LDAPSetting exists GET shows the
// environment's directory (`source: "environment"`). The rules are the store's (host/ldap-setting.ts).
import { Type } from 'typebox';
import type { LdapSettings } from '../../host/ldap-setting.js';
import { bothSlashes, schemaOf, stringEnum, type App } from '../schemas.js';

const schema = schemaOf('settings');
const LDAP_SETTING = '/api/v1/admin/ldap-setting';

const dn = (description: string) => Type.String({ maxLength: 1024, description });
const attribute = (description: string) => Type.String({ maxLength: 128, description });
const filter = (description: string) => Type.String({ maxLength: 1024, description });

const LdapSetting = Type.Object(
  {
    enabled: Type.Boolean(),
    serverUrl: Type.String({ description: 'ldap:// (with StartTLS, plain only on loopback) or ldaps://' }),
    useStartTLS: Type.Boolean(),
    caCert: Type.String({ description: 'PEM of the directory certificate\'s CA; "" for the system CAs' }),
    bindDn: Type.String(),
    bindPassword: Type.String({ description: 'always "" (the password is never shown)' }),
    bindPasswordConfigured: Type.Boolean({ description: 'a bind password is stored' }),
    userBaseDn: Type.String(),
    userFilter: Type.String(),
    usernameAttribute: Type.String(),
    displayNameAttribute: Type.String(),
    groupBaseDn: Type.String({ description: '"": no groups' }),
    groupFilter: Type.String(),
    groupNameAttribute: Type.String(),
    source: stringEnum(['setting', 'environment', 'none'], {
      description: 'where the directory in force comes from: the LDAPSetting, KITELINE_LDAP_*, or nowhere',
    }),
    problem: Type.String({ description: 'why an LDAPSetting applied with kubectl is not used; "" when it is' }),
  },
  { description: 'The LDAP directory users sign in against (never the bind password)' },
);

const LdapSettingBody = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean({ description: "false turns LDAP sign-in off (the environment's too)" })),
    serverUrl: Type.Optional(Type.String({ maxLength: 2048, description: 'a change needs bindPassword again' })),
    useStartTLS: Type.Optional(Type.Boolean()),
    caCert: Type.Optional(Type.String({ maxLength: 65536, description: 'PEM; a change needs bindPassword again' })),
    bindDn: Type.Optional(dn("the service account's DN")),
    bindPassword: Type.Optional(
      Type.String({ maxLength: 1024, description: 'write-only; absent or "" keeps the stored one' }),
    ),
    userBaseDn: Type.Optional(dn('where users are searched (subtree)')),
    userFilter: Type.Optional(filter('{username} (or Kite\'s %s) stands for the username; "" for (uid={username})')),
    usernameAttribute: Type.Optional(attribute('"" for uid')),
    displayNameAttribute: Type.Optional(attribute('"" for cn')),
    groupBaseDn: Type.Optional(dn('where groups are searched (subtree); "" for no groups')),
    groupFilter: Type.Optional(filter('{dn} (or Kite\'s %s) and {username} stand for the user; "" for (member={dn})')),
    groupNameAttribute: Type.Optional(attribute('"" for cn')),
    // Read-only members of the answer: accepted and ignored, so a client can send back what it read.
    bindPasswordConfigured: Type.Optional(Type.Unknown({ description: 'read-only: ignored' })),
    source: Type.Optional(Type.Unknown({ description: 'read-only: ignored' })),
    problem: Type.Optional(Type.Unknown({ description: 'read-only: ignored' })),
  },
  { additionalProperties: false },
);

function ldapSettingView(settings: LdapSettings) {
  return { ...settings, bindPassword: '' };
}

export default async function ldapSettingRoutes(app: App) {
  const { ldapSettings } = app.services;

  const getRoute = {
    schema: schema('The LDAP directory users sign in against (never the bind password)', {
      response: { 200: LdapSetting },
    }),
  };
  bothSlashes(LDAP_SETTING, (url) => app.get(url, getRoute, async () => ldapSettingView(ldapSettings.settings())));

  const putRoute = {
    schema: schema('Configure the LDAP directory (absent members are kept; holds from the next sign-in)', {
      description:
        'Stored as the LDAPSetting `ldap`, which from then on decides instead of KITELINE_LDAP_*. The rules of ' +
        'docs/auth.md: ldaps:// or StartTLS (plain ldap:// only on loopback), a CA in PEM, filters with their ' +
        'placeholder, serverUrl, bindDn, userBaseDn and a bind password when enabled; a new serverUrl or caCert ' +
        'needs the bind password again. A broken rule: 400, and nothing changes.',
      body: LdapSettingBody,
      response: { 200: LdapSetting },
    }),
  };
  bothSlashes(LDAP_SETTING, (url) =>
    app.put(url, putRoute, async (request) => {
      const { bindPasswordConfigured: _, source: _source, problem: _problem, ...input } = request.body;
      return ldapSettingView(await ldapSettings.update(input));
    }),
  );
}
