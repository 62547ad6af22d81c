// @ts-check
// kiteline's linter, run by `make lint` (and so by `make test`, and CI) with `prettier --check .`.
//
// Decisions (issue 15, point 5):
// - Width 120 for everything: Prettier's printWidth (.prettierrc.json) and @stylistic/max-len here,
//   which counts every line, comments, strings and template literals included (no URL or regexp
//   exception). The code was written at up to ~160 columns, comments wrapped at ~100. After
//   `prettier --write`, 110 lines of src, test and bench were still over 120 (strings and templates
//   Prettier does not break; fixed by hand); at 100 it would have been 446, at 140 40.
// - Formatting is Prettier's alone (single quotes, trailing commas, semicolons, 2 spaces, as the code
//   was written): no formatting rule here but max-len, which Prettier does not enforce on strings and
//   comments.
// - typescript-eslint's recommendedTypeChecked on the TypeScript: the typed rules are the ones that
//   catch bugs (floating and misused promises, `any` leaking out of untyped data); `eslint .` takes
//   15 to 45 s. Besides: eqeqeq, no-console outside the CLI, benchmarks and scripts, `import type`
//   for types, `return await` in try. Rules switched off or narrowed say why where they are.
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import stylistic from '@stylistic/eslint-plugin';
import { defineConfig } from 'eslint/config';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const WIDTH = 120;

/**
 * The layering of src/ (docs/architecture.md): each folder and the folders it may import (besides
 * the top-level files: errors, log, config, within). gateway/ may import everything. Kept by
 * no-restricted-imports below, so the picture in the docs is checked, not only described.
 */
const LAYERS = {
  credentials: [],
  controlplane: [],
  host: ['credentials'],
  auth: ['host', 'credentials'],
  clusters: ['host', 'credentials'],
  audit: ['host'],
  // Session recording (docs/sessions.md): recorders, their storage on the host, search and replay.
  recording: ['host'],
  metrics: ['clusters', 'host'],
  'cluster-access': ['auth', 'clusters', 'host', 'credentials'],
  // The features of the cluster side: each uses the kit below it, none another (tools/related.ts
  // reuses describe's reader of related objects).
  resources: ['cluster-access', 'auth', 'clusters', 'host', 'credentials'],
  proxy: ['cluster-access', 'auth', 'clusters', 'host', 'credentials', 'audit', 'recording'],
  workloads: ['cluster-access', 'auth', 'clusters', 'host', 'credentials'],
  describe: ['cluster-access', 'auth', 'clusters', 'host', 'credentials'],
  tools: ['cluster-access', 'auth', 'clusters', 'host', 'credentials', 'describe'],
  // Image registries (an image's tags): no cluster, only the address rules of credentials/.
  registries: ['credentials'],
  // Helm releases and charts (docs/helm.md): releases read as the caller, writes through helm, chart
  // repositories' indexes and OCI tags (registries/).
  helm: ['cluster-access', 'auth', 'clusters', 'host', 'credentials', 'registries'],
  // Kite's charts on a cluster's Prometheus (docs/monitoring.md).
  monitoring: ['cluster-access', 'auth', 'clusters', 'host', 'credentials'],
  // The MCP server's tools (docs/mcp.md): another door onto the same reads (describe, events, logs,
  // search), and the audit record of each call.
  mcp: ['cluster-access', 'auth', 'clusters', 'host', 'credentials', 'describe', 'tools', 'workloads', 'audit'],
};
const FOLDERS = [...Object.keys(LAYERS), 'gateway'];

/** One config block per folder: importing a folder not in its list is an error naming the rule. */
const layering = Object.entries(LAYERS).map(([folder, allowed]) => {
  const forbidden = FOLDERS.filter((other) => other !== folder && !allowed.includes(other));
  const may = allowed.join(', ') || 'top-level files';
  return {
    files: [`src/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^(\\.\\./)+(${forbidden.join('|')})/`,
              message: `src/${folder}/ may import only ${may} (docs/architecture.md)`,
            },
          ],
        },
      ],
    },
  };
});

/** The rules that flag reading or passing on a value typed `any`. */
const NO_UNSAFE_ANY = {
  '@typescript-eslint/no-unsafe-argument': 'off',
  '@typescript-eslint/no-unsafe-assignment': 'off',
  '@typescript-eslint/no-unsafe-call': 'off',
  '@typescript-eslint/no-unsafe-member-access': 'off',
  '@typescript-eslint/no-unsafe-return': 'off',
};

export default defineConfig(
  { ignores: ['dist/', '.kiteline/', '.tap/', 'node_modules/'] },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: dirname(fileURLToPath(import.meta.url)) },
    },
    rules: {
      // Fastify handlers and interface implementations are `async` without an `await` on purpose.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // `import type` for what is only a type (the existing convention), so imports say what runs.
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-import-type-side-effects': 'error',
      // `return await` inside try, so the catch and finally see the rejection.
      '@typescript-eslint/return-await': ['error', 'in-try-catch'],
      // Types whose toString() is their text: Node's URLSearchParams (a query string) and the describers'
      // Quantity (kubectl's quantity notation), besides the rule's defaults.
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        {
          allow: [
            { from: 'lib', name: ['Error', 'URL', 'URLSearchParams'] },
            { from: 'package', package: 'url', name: 'URLSearchParams' },
            { from: 'file', path: 'src/cluster-access/quantity.ts', name: 'Quantity' },
          ],
        },
      ],
    },
  },
  {
    // The JavaScript of bin/ and scripts/ (and this file): Node ESM, not type-checked.
    files: ['**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: { process: 'readonly', console: 'readonly', URL: 'readonly' },
    },
  },
  {
    plugins: { '@stylistic': stylistic },
    rules: {
      eqeqeq: ['error', 'always'],
      // Matching control characters is the point where the code does it: to escape or refuse them.
      'no-control-regex': 'off',
      'no-console': 'error',
      '@stylistic/max-len': ['error', { code: WIDTH, tabWidth: 2 }],
    },
  },
  ...layering,
  {
    // No import cycle in src/, type-only imports included: with the layering above, the import
    // graph is a one-way picture (docs/architecture.md). Imports name the compiled `.js`.
    files: ['src/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createNodeResolver({ extensionAlias: { '.js': ['.ts', '.js'] } })],
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] },
  },
  {
    files: ['src/cli.ts', 'src/terminal-client.ts', 'bench/**', 'scripts/**', 'bin/**'],
    rules: { 'no-console': 'off' },
  },
  {
    // kubectl's describers (ported from Go), the related-objects reader and the cluster overview read
    // untyped Kubernetes objects through Record<string, any> on purpose: each field read would need a cast.
    files: ['src/describe/**', 'src/tools/related.ts', 'src/resources/overview.ts'],
    rules: { ...NO_UNSAFE_ANY, '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['test/**', 'bench/**'],
    rules: {
      // Tests and benchmarks read response bodies as `any` and reach into internals.
      ...NO_UNSAFE_ANY,
      '@typescript-eslint/no-explicit-any': 'off',
      // tap queues `t.test(...)` subtests itself; other promises (t.rejects, ...) must be awaited.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafePromises: [{ from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' }] },
      ],
    },
  },
);
