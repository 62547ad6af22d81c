// GET /api/v1/version: Kite's version answer ({version, buildDate, commitId, hasNewVersion,
// releaseUrl}) for its sidebar. kiteline's version is its package version; build date and commit
// are not recorded in a build ("" both). kiteline never calls out to look for new releases:
// hasNewVersion is always false. Signed-in
// callers only (Kite answers anyone; a version tells an attacker which advisories to try).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { PACKAGE_ROOT } from '../../config.js';
import { objectOf, replies } from '../schemas.js';

export interface VersionInfo {
  version: string;
  buildDate: string;
  commitId: string;
  hasNewVersion: boolean;
  releaseUrl: string;
}

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

export default async function versionRoutes(app: FastifyInstance) {
  const info = versionInfo();
  const string = { type: 'string' };
  app.get(
    '/api/v1/version',
    {
      onRequest: app.requireUser,
      schema: {
        tags: ['health'],
        summary: "kiteline's version (Kite's shape)",
        response: replies({ 200: objectOf({ version: string, buildDate: string, commitId: string, hasNewVersion: { type: 'boolean' }, releaseUrl: string }) }),
      },
    },
    async () => info,
  );
}
