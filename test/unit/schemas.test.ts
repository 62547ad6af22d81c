// The named shapes of the API (src/gateway/schemas.ts) against the views the code builds: every
// view type must fit its shape's Static type (checked by the compiler below), and the answers the
// views produce must pass the shape (a `required` member missing would be a 500 from the serializer).
// The hand-written view types these compare against are to be replaced by the Static types; each
// line goes when its interface does. The identity views (gateway/views/identity.ts) are typed with
// the Static types themselves: their answers are checked below.
import t from 'tap';
import { Value } from 'typebox/value';
import { apiKeyCallerView, apiKeyView, roleView, userView } from '../../src/gateway/views/identity.js';
import type { ClusterView as ClusterInterface } from '../../src/host/clusters.js';
import { ID_LABEL, type APIKeyResource, type RoleResource, type UserResource } from '../../src/host/resources.js';
import type { Overview as OverviewInterface } from '../../src/resources/overview.js';
import {
  APIKey,
  Cluster,
  Overview,
  Role,
  RoleAssignment,
  SessionUser,
  SHARED_SCHEMAS,
  User,
  type ClusterView,
  type OverviewView,
} from '../../src/gateway/schemas.js';

/** true when A is assignable to B. */
type Fits<A, B> = [A] extends [B] ? true : false;
const viewsFitShapes: [Fits<ClusterInterface, ClusterView>, Fits<OverviewInterface, OverviewView>] = [true, true];

t.same(viewsFitShapes, [true, true], 'the view types fit the shapes (a compile error otherwise)');

t.test('the named shapes are plain JSON Schema with their $id', async (t) => {
  const ids = SHARED_SCHEMAS.map((s) => s.$id);
  t.equal(new Set(ids).size, ids.length, 'each $id once');
  for (const schema of SHARED_SCHEMAS) {
    t.notMatch(JSON.stringify(schema), /"~/, `${schema.$id}: no TypeBox markers in the JSON`);
    t.ok(schema.$id, 'has an $id');
  }
});

t.test('answers as the views build them pass their shapes', async (t) => {
  const created = '2026-01-01T00:00:00Z';
  const metadata = (name: string, id: number) => ({
    name,
    labels: { [ID_LABEL]: String(id) },
    creationTimestamp: created,
  });
  const admin = { metadata: metadata('admin', 1), spec: { name: 'admin' } } as unknown as RoleResource;
  const roleByName = (name: string) => (name === 'admin' ? admin : undefined);
  const ada = {
    metadata: metadata('ada', 7),
    spec: { username: 'ada', roles: ['admin', 'gone'] },
  } as unknown as UserResource;
  const user = userView(ada, roleByName);
  t.ok(Value.Check(User, user), 'User');
  t.same(user.roles, [{ id: 1, name: 'admin' }], 'only the roles that exist');
  t.notOk(Value.Check(User, { ...user, lastLoginAt: undefined }), 'a missing member fails the shape');
  // Role refers to RoleAssignment by `$ref: 'RoleAssignment#'`: the context resolves it.
  const role = roleView(admin, [ada]);
  t.equal(role.assignments.length, 1, 'the holder is assigned');
  t.ok(Value.Check({ 'RoleAssignment#': RoleAssignment }, Role, role), 'Role (with an assignment)');
  const key = { metadata: metadata('k', 3), spec: { name: 'k', roles: ['admin'] } } as unknown as APIKeyResource;
  t.ok(Value.Check(APIKey, apiKeyView(key)), 'APIKey');
  const principal = { kind: 'apikey' as const, id: 3, name: 'apikey:k', roles: ['admin'], groups: [] };
  t.ok(Value.Check(SessionUser, userView(ada, roleByName)), 'SessionUser (a user)');
  t.ok(Value.Check(SessionUser, apiKeyCallerView(principal, key, roleByName)), 'SessionUser (an API key)');
  const gone = apiKeyCallerView(principal, undefined, roleByName);
  t.ok(Value.Check(SessionUser, gone), 'SessionUser (an API key gone: createdAt null)');
  const cluster: ClusterInterface = {
    id: 1,
    name: 'a',
    description: '',
    config: '',
    prometheusURL: '',
    production: false,
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
});
