// The named shapes of the API (src/gateway/schemas.ts) against the views the code builds: every
// view type must fit its shape's Static type (checked by the compiler below), and the answers the
// views produce must pass the shape (a `required` member missing would be a 500 from the serializer).
// The hand-written view types these compare against are to be replaced by the Static types; each
// line goes when its interface does.
import t from 'tap';
import { Value } from 'typebox/value';
import type { UserView as UserInterface, roleView, apiKeyView } from '../../src/gateway/views/identity.js';
import type { ClusterView as ClusterInterface } from '../../src/host/clusters.js';
import type { Overview as OverviewInterface } from '../../src/resources/overview.js';
import {
  APIKey,
  Cluster,
  Overview,
  Role,
  SHARED_SCHEMAS,
  User,
  type APIKeyView,
  type ClusterView,
  type OverviewView,
  type RoleView,
  type UserView,
} from '../../src/gateway/schemas.js';

/** true when A is assignable to B. */
type Fits<A, B> = [A] extends [B] ? true : false;
const viewsFitShapes: [
  Fits<UserInterface, UserView>,
  Fits<ReturnType<typeof roleView>, RoleView>,
  Fits<ReturnType<typeof apiKeyView>, APIKeyView>,
  Fits<ClusterInterface, ClusterView>,
  Fits<OverviewInterface, OverviewView>,
] = [true, true, true, true, true];

t.same(viewsFitShapes, [true, true, true, true, true], 'the view types fit the shapes (a compile error otherwise)');

t.test('the named shapes are plain JSON Schema with their $id', async (t) => {
  const ids = SHARED_SCHEMAS.map((s) => s.$id);
  t.equal(new Set(ids).size, ids.length, 'each $id once');
  for (const schema of SHARED_SCHEMAS) {
    t.notMatch(JSON.stringify(schema), /"~/, `${schema.$id}: no TypeBox markers in the JSON`);
    t.ok(schema.$id, 'has an $id');
  }
});

t.test('answers as the views build them pass their shapes', async (t) => {
  const user: UserInterface = {
    id: 1,
    username: 'ada',
    name: '',
    avatar_url: '',
    provider: 'password',
    enabled: true,
    createdAt: '2026-01-01T00:00:00Z',
    lastLoginAt: null,
    roles: [{ id: 1, name: 'admin' }],
    sidebar_preference: '',
  };
  t.ok(Value.Check(User, user), 'User');
  t.notOk(Value.Check(User, { ...user, lastLoginAt: undefined }), 'a missing member fails the shape');
  const cluster: ClusterInterface = {
    id: 1,
    name: 'a',
    description: '',
    config: '',
    prometheusURL: '',
    inCluster: false,
    isDefault: true,
    enabled: true,
    impersonate: false,
    version: '',
    ready: true,
    error: '',
  };
  t.ok(Value.Check(Cluster, cluster), 'Cluster');
  const amounts = { allocatable: 1, requested: 0, limited: 0 };
  const overview: OverviewInterface = {
    totalNodes: 1,
    readyNodes: 1,
    totalPods: 0,
    runningPods: 0,
    totalNamespaces: 1,
    totalServices: 0,
    prometheusEnabled: false,
    resource: { cpu: amounts, memory: amounts },
  };
  t.ok(Value.Check(Overview, overview), 'Overview');
  t.ok(Value.Check(APIKey, { id: 1, name: 'k', roles: [], expiresAt: null, createdAt: '2026-01-01T00:00:00Z', lastUsedAt: null, createdBy: '' }), 'APIKey');
  t.ok(
    Value.Check(Role, {
      id: 1,
      name: 'r',
      description: '',
      isSystem: false,
      clusters: [],
      namespaces: [],
      resources: [],
      verbs: [],
      createdAt: '2026-01-01T00:00:00Z',
      assignments: [],
    }),
    'Role',
  );
});
