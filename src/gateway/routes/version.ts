// GET /api/v1/version: Kite's version answer ({version, buildDate, commitId, hasNewVersion,
// releaseUrl}) for its sidebar. kiteline's version is its package version; build date and commit
// are not recorded in a build ("" both). kiteline never calls out to look for new releases:
// hasNewVersion is always false. Signed-in
// callers only (Kite answers anyone; a version tells an attacker which advisories to try).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Type, type Static } from 'typebox';
import { PACKAGE_ROOT } from '../../config.js';
import { schemaOf, type App } from '../schemas.js';

const VersionInfo = Type.Object({
  version: Type.String(),
  buildDate: Type.String(),
  commitId: Type.String(),
  hasNewVersion: Type.Boolean(),
  releaseUrl: Type.String(),
});
export type VersionInfo = Static<typeof VersionInfo>;

function versionInfo(): VersionInfo {
  const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: string };
  return {
    version: pkg.version ?? '0.0.0',
    buildDate: '',
    commitId: '',
    hasNewVersion: false,
    releaseUrl: '',
  };
}

export default async function versionRoutes(app: App) {
  const info = versionInfo();
  app.get(
    '/api/v1/version',
    {
      onRequest: app.requireUser,
      schema: schemaOf('health')("kiteline's version (Kite's shape)", { response: { 200: VersionInfo } }),
    },
    async () => info,
  );
}
