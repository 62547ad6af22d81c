// The shapes of the API, each defined once: a TypeBox schema is at the same time the JSON Schema
// Fastify validates requests with, the one fast-json-stringify serializes answers with, the one
// @fastify/swagger documents, and (Static<typeof X>) the TypeScript type. Here: the named shapes
// (ErrorResponse, User, Role, APIKey, Cluster, ...; registered with app.addSchema, referenced as
// `$ref: 'Name#'` so the OpenAPI document keeps them under components.schemas), their types, the
// security requirements of the document, and the helpers route modules build their schemas with.
//
// How a route declares its shapes (the convention):
//  - The module exports `default async function xRoutes(app: App)` (App: the instance with the
//    TypeBox type provider), so request.body/query/params are typed from the route's schema.
//  - A route's schema is built by `schemaOf(<tag>)` (admin, auth, setup, ... routes) or
//    `clusterSchema` (routes on the selected cluster: tag `resources`, the `x-cluster-name` header
//    and cookie) from the summary and what is the route's own: `schema('Delete a user', { params:
//    idParams, response: { 200: ref('Success') } })`. They add the tags and the error answers.
//  - Each body, querystring and params is one `Type.Object(...)` const named after what it is
//    (`ApplyBody`, `LogQuery`); its type, where a helper needs one, is `Static<typeof ApplyBody>`:
//    never a hand-written interface beside it. Optional members are Type.Optional; a body that
//    takes nothing else says `{ additionalProperties: false }`.
//  - Answers: `response: { 200: X }`; ErrorResponse for 4xx and 5xx is added. A named shape is `ref('User')`
//    (typed as the shape); its type is exported here (UserView, ClusterView, ...): views are typed
//    with it, not with an interface of their own. A member the answer always has is plain; one it
//    may leave out is Type.Optional (`objectOf` makes them all optional). The handler RETURNS the
//    answer (after `reply.code(201)` if need be), so the compiler checks it against the schema. An
//    answer the handler streams itself is `streamed(...)`: documented, never serialized, unknown.
//  - A helper several routes share takes `RequestWith<{ query: Static<typeof X> }>`, not FastifyRequest.
//  - Strings with a fixed set of values: `stringEnum([...])`; nullable members: `nullable(X)`; a
//    member with a default: `defaulted(Type.Integer({ default: 1 }))`.
//  - TypeBox only builds schemas: Ajv still validates, with app.ts's options (coercion, defaults),
//    so error messages ("invalid request: body must have required property 'name'") are unchanged.
//
// Response schemas are what Fastify serializes with (fast-json-stringify): a property that is not
// listed here is DROPPED from the answer, a null in a `string` property becomes "", and a listed
// `required` member that is missing fails the answer (500). So every member of every view is listed,
// nullable ones with type [..., 'null'] (nullable()), members an answer may lack are optional, and
// free-form answers (Kubernetes objects, whose streams Fastify never re-serializes) are open objects.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyRequest,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import {
  Type,
  type Static,
  type TObject,
  type TOptional,
  type TProperties,
  type TSchema,
  type TSchemaOptions,
  type TUnsafe,
} from 'typebox';

/** The gateway as route modules see it: Fastify with the TypeBox type provider (app.ts). */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/**
 * A request as a helper shared by several routes takes it: any route's request whose parts have
 * these types, e.g. `RequestWith<{ params: Static<typeof ObjectViewParams> }>`.
 */
export type RequestWith<Parts extends { params?: unknown; query?: unknown; body?: unknown }> = FastifyRequest & Parts;

// ---- Builders --------------------------------------------------------------------------------

/** A member that may be null: `type: [<type>, 'null']`, so the serializer writes null (not ""). */
export function nullable<T extends TSchema & { type: string }>(schema: T): TUnsafe<Static<T> | null> {
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [schema.type, 'null'] });
}

/**
 * A string with a fixed set of values: `{type: 'string', enum}` (Ajv's "must be equal to one of the
 * allowed values").
 */
export function stringEnum<const V extends readonly string[]>(
  values: V,
  options: TSchemaOptions = {},
): TUnsafe<V[number]> {
  return Type.Unsafe<V[number]>({ type: 'string', enum: [...values], ...options });
}

/**
 * An answer the handler sends itself (a stream through reply.send, a WebSocket, server-sent
 * events): documented by `schema`, never serialized by Fastify, typed unknown.
 */
export function streamed(schema: object): TUnsafe<unknown> {
  return Type.Unsafe<unknown>(schema);
}

/** An object whose members are not modeled: `{type: 'object', additionalProperties: true}`, typed `object`. */
export function openObject(options: TSchemaOptions = {}): TUnsafe<object> {
  return Type.Unsafe<object>({ type: 'object', additionalProperties: true, ...options });
}

/**
 * A member with a `default`: optional to the client (not in `required`), always there for the
 * handler (Ajv fills the default in before it runs), so its type is not optional.
 */
export function defaulted<T extends TSchema>(schema: T): T {
  return Type.Optional(schema);
}

type AllOptional<P extends TProperties> = { [K in keyof P]: P[K] extends TOptional<TSchema> ? P[K] : TOptional<P[K]> };

/**
 * An object answer with the given members, each optional: listed so the serializer keeps them, none
 * promised (no `required`). For shapes whose members are always there, use Type.Object.
 */
export function objectOf<P extends TProperties>(properties: P, description?: string): TObject<AllOptional<P>> {
  const optional = Object.fromEntries(Object.entries(properties).map(([key, schema]) => [key, Type.Optional(schema)]));
  return Type.Object(optional, description ? { description } : {}) as unknown as TObject<AllOptional<P>>;
}

const string = Type.String();
const boolean = Type.Boolean();
const integer = Type.Integer();
const stringList = (description?: string) => Type.Array(Type.String(), description ? { description } : {});
const timestamp = () => Type.String({ description: 'ISO 8601 UTC date-time' });
const nullableTimestamp = () => nullable(Type.String({ description: 'ISO 8601 UTC date-time, null when never' }));

/** A reference to a named shape (its `$id`), typed as that shape. */
function refTo<T extends TSchema>(_schema: T, id: string): TUnsafe<Static<T>> {
  return Type.Unsafe<Static<T>>({ $ref: `${id}#` });
}

// ---- The named shapes ------------------------------------------------------------------------

export const ErrorResponse = Type.Object(
  {
    error: string,
    reason: Type.String({
      description: 'e.g. BadRequest, Unauthorized, NotFound, AlreadyExists, Conflict, Invalid, BadGateway',
    }),
    code: integer,
    details: Type.Optional(
      Type.Unknown({ description: "the `details` of a target cluster's Status object, when it sent one" }),
    ),
  },
  { $id: 'ErrorResponse', description: 'Every error: a human message, a Kubernetes-style reason and the status code' },
);

/** The GitOps owner of a Cluster, User or Role applied from Git (src/host/gitops.ts). */
const managedBy = Type.Optional(
  Type.Object(
    {
      tool: stringEnum(['flux', 'argocd']),
      kind: stringEnum(['Kustomization', 'HelmRelease', 'Application']),
      namespace: Type.String({ description: 'the owner\'s namespace, "" when unknown' }),
      name: Type.String({ description: 'the owner\'s name, "" when only its field manager tells the tool' }),
    },
    {
      description:
        'only for an object applied by a GitOps engine (docs/gitops.md): the Flux Kustomization or HelmRelease, ' +
        'or the Argo CD Application; such an object is changed in Git (the admin API answers 409)',
    },
  ),
);

const userProperties = {
  id: integer,
  username: string,
  name: string,
  avatar_url: string,
  provider: Type.String({
    description:
      '`password`, `ldap`, or the OAuth provider the user signs in with (an API key shown as a user: `api_key`)',
  }),
  enabled: boolean,
  createdAt: timestamp(),
  lastLoginAt: nullableTimestamp(),
  roles: Type.Array(Type.Object({ id: integer, name: string })),
  sidebar_preference: Type.String({
    description: 'Kite UI\'s sidebar layout (JSON text) the user saved, "" when none',
  }),
  oidc_groups: Type.Array(Type.String(), {
    description: "the identity provider's groups of the user at their last sign-in ([] for a password user)",
  }),
  managedBy,
};

export const User = Type.Object(userProperties, { $id: 'User', description: 'A user (never a password or hash)' });

export const SessionUser = Type.Object(
  {
    ...userProperties,
    createdAt: nullableTimestamp(),
    mfa_enabled: Type.Optional(Type.Boolean({ description: 'the user has TOTP on (docs/second-factors.md)' })),
  },
  { $id: 'SessionUser', description: 'The caller: a user, or an API key shown as a user with provider `api_key`' },
);

export const RoleAssignment = Type.Object(
  {
    roleId: integer,
    subjectType: stringEnum(['user', 'group']),
    subject: Type.String({ description: 'the username, or the group: `oidc:<provider>/<group>` or `ldap/<group>`' }),
  },
  { $id: 'RoleAssignment', description: "A role held by a user, or by every member of an identity provider's group" },
);

export const Role = Type.Object(
  {
    id: integer,
    name: string,
    description: string,
    isSystem: Type.Boolean({ description: 'built-in (admin, viewer): cannot be changed or deleted' }),
    clusters: stringList(),
    namespaces: stringList(),
    resources: stringList(),
    verbs: stringList(),
    createdAt: timestamp(),
    assignments: Type.Array(refTo(RoleAssignment, 'RoleAssignment')),
    managedBy,
  },
  {
    $id: 'Role',
    description: 'A role: anchored glob patterns (`*`, `prod-*`, `!x` excludes) and the users holding it',
  },
);

const apiKeyProperties = {
  id: integer,
  name: string,
  roles: stringList('names of the roles the key carries'),
  expiresAt: nullableTimestamp(),
  createdAt: timestamp(),
};

export const APIKey = Type.Object(
  { ...apiKeyProperties, lastUsedAt: nullableTimestamp(), createdBy: string },
  { $id: 'APIKey', description: 'An API key (never its secret)' },
);

export const NewAPIKey = Type.Object(
  { ...apiKeyProperties, key: string },
  {
    $id: 'NewAPIKey',
    description: 'A new API key; `key` is the whole value to send as `Authorization: <key>`, shown this once',
  },
);

export const KubeconfigToken = Type.Object(
  {
    id: integer,
    name: string,
    roles: stringList('names of the roles the token carries (its owner must still hold them)'),
    createdAt: timestamp(),
    expiresAt: timestamp(),
    lastUsedAt: nullableTimestamp(),
    audience: stringEnum(['kubernetes', 'mcp', 'console'], {
      description:
        "where it is accepted: the Kubernetes API (a kubeconfig token), /mcp (an MCP token), or a kubectl console's " +
        'cluster',
    }),
    clusters: Type.Optional(stringList("a kubectl console's token: the only clusters it reaches")),
    ownerId: Type.Optional(Type.Integer({ description: "the owner's user id (admin list only)" })),
    owner: Type.Optional(Type.String({ description: "the owner's username (admin list only)" })),
  },
  {
    $id: 'KubeconfigToken',
    description: 'A token minted for a user: a kubeconfig or MCP token (an API key it owns; never its secret)',
  },
);

export const Cluster = Type.Object(
  {
    id: integer,
    name: string,
    description: string,
    config: Type.String({ description: 'always "" (the kubeconfig is never shown)' }),
    prometheusURL: string,
    inCluster: boolean,
    isDefault: boolean,
    enabled: boolean,
    impersonate: Type.Boolean({ description: 'requests reach the cluster as the caller (Impersonate-User/-Group)' }),
    production: Type.Boolean({
      description: "labelled kiteline.io/production=true: an AI agent's writes there always ask a human (docs/mcp.md)",
    }),
    version: Type.String({ description: 'the gitVersion of the cluster, "" when unknown' }),
    ready: boolean,
    error: Type.String({ description: 'the last connection error, "" when none' }),
    source: Type.Optional(
      Type.Object(
        {
          kind: stringEnum(['argocd', 'capi', 'clusterprofile']),
          namespace: string,
          name: string,
        },
        {
          description:
            'only for a cluster read from a source (docs/clusters.md): the source object; ' +
            'such a cluster is changed and deleted there (the admin API answers 409)',
        },
      ),
    ),
    managedBy,
  },
  { $id: 'Cluster', description: 'A registered cluster (admin view; `config` is always "")' },
);

export const ClusterSummary = Type.Object(
  { name: string, version: string, isDefault: boolean, ready: boolean, error: string },
  { $id: 'ClusterSummary', description: 'A cluster as any signed-in user sees it' },
);

const resourceAmounts = Type.Object({ allocatable: Type.Number(), requested: Type.Number(), limited: Type.Number() });

export const Overview = Type.Object(
  {
    totalNodes: integer,
    readyNodes: integer,
    totalPods: integer,
    runningPods: integer,
    totalNamespaces: integer,
    totalServices: integer,
    prometheusEnabled: boolean,
    resource: Type.Object({ cpu: resourceAmounts, memory: resourceAmounts }),
  },
  {
    $id: 'Overview',
    description: 'The counts on the home page of the selected cluster; CPU and memory in milli-units',
    additionalProperties: true,
  },
);

// Passed through as the cluster sent it (a stream Fastify never re-serializes): not modeled.
export const KubernetesObject = streamed({
  $id: 'KubernetesObject',
  description: "The target cluster's answer, passed through unchanged (an object, a List or a stream of watch events)",
  type: 'object',
  additionalProperties: true,
}) as TUnsafe<unknown> & { $id: 'KubernetesObject' };

export const OpenAPIDocument = openObject({
  $id: 'OpenAPIDocument',
  description: 'An OpenAPI 3 document',
}) as TUnsafe<object> & { $id: 'OpenAPIDocument' };

export const OAuthProvider = Type.Object(
  {
    id: integer,
    name: string,
    clientId: string,
    clientSecret: Type.String({ description: 'always "***" when one is stored, else "" (never the secret)' }),
    issuer: string,
    authUrl: string,
    tokenUrl: string,
    userInfoUrl: string,
    scopes: string,
    usernameClaim: string,
    groupsClaim: string,
    allowedGroups: Type.String({ description: 'comma-separated: only their members sign in; "" for anyone' }),
    enabled: boolean,
    createdAt: timestamp(),
  },
  { $id: 'OAuthProvider', description: 'An OpenID Connect provider users sign in with (never its client secret)' },
);

export const Message = Type.Object({ message: string }, { $id: 'Message', description: 'A confirmation' });

export const Success = Type.Object({ success: boolean }, { $id: 'Success', description: 'A confirmation' });

// The TypeScript types of the named shapes (the views the routes answer with).
export type ErrorView = Static<typeof ErrorResponse>;
export type UserView = Static<typeof User>;
export type SessionUserView = Static<typeof SessionUser>;
export type RoleView = Static<typeof Role>;
export type RoleAssignmentView = Static<typeof RoleAssignment>;
export type APIKeyView = Static<typeof APIKey>;
export type NewAPIKeyView = Static<typeof NewAPIKey>;
export type KubeconfigTokenView = Static<typeof KubeconfigToken>;
export type ClusterView = Static<typeof Cluster>;
export type ClusterSummaryView = Static<typeof ClusterSummary>;
export type OverviewView = Static<typeof Overview>;
export type MessageView = Static<typeof Message>;
export type OAuthProviderView = Static<typeof OAuthProvider>;
export type SuccessView = Static<typeof Success>;

/** The named shapes by `$id` (also their name under components.schemas in the OpenAPI document). */
const NAMED = {
  ErrorResponse,
  User,
  SessionUser,
  Role,
  RoleAssignment,
  APIKey,
  NewAPIKey,
  KubeconfigToken,
  Cluster,
  ClusterSummary,
  Overview,
  OAuthProvider,
  KubernetesObject,
  OpenAPIDocument,
  Message,
  Success,
};

export type SharedSchemaId = keyof typeof NAMED;

export const SHARED_SCHEMAS: ({ $id: SharedSchemaId } & TSchema)[] = Object.values(NAMED) as ({
  $id: SharedSchemaId;
} & TSchema)[];

/**
 * `{ $ref: 'Name#' }`: a reference to one of SHARED_SCHEMAS, for Fastify and the document alike, typed
 * as that shape.
 */
export function ref<K extends SharedSchemaId>(id: K): TUnsafe<Static<(typeof NAMED)[K]>> {
  return Type.Unsafe<Static<(typeof NAMED)[K]>>({ $ref: `${id}#` });
}

export function registerSharedSchemas(app: FastifyInstance): void {
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
}

const errorRef = ref('ErrorResponse');

/** A route's responses: its success answers plus the one error shape for every 4xx and 5xx. */
type Replies<S extends Record<number, TSchema>> = S & { '4xx': typeof errorRef; '5xx': typeof errorRef };

/** A 204 answer: no body. */
export function noContent(description: string): TSchema {
  return Type.Null({ description });
}

/**
 * The members of Kite's ResourceHistory, which both its audit-log page and its history tab read
 * (routes/audit-logs.ts, routes/history.ts); `yamlDescriptions` says what the two YAML members hold there.
 */
export function resourceHistoryProperties(yamlDescriptions: { resourceYaml: string; previousYaml: string }) {
  return {
    id: Type.Integer(),
    createdAt: Type.String({ format: 'date-time', description: 'when the action began' }),
    updatedAt: Type.String({ format: 'date-time', description: 'when it ended, else createdAt' }),
    clusterName: Type.String(),
    resourceType: Type.String(),
    resourceName: Type.String(),
    namespace: Type.String(),
    operationType: Type.String(),
    resourceYaml: Type.String({ description: yamlDescriptions.resourceYaml }),
    previousYaml: Type.String({ description: yamlDescriptions.previousYaml }),
    success: Type.Boolean(),
    errorMessage: Type.String(),
    operatorId: Type.Integer(),
  };
}

/**
 * A collection route under both spellings Kite's clients use (`/api/v1/admin/users/` and
 * `/api/v1/admin/users`): `register` is called with each.
 */
export function bothSlashes(collection: string, register: (url: string) => unknown): void {
  for (const url of [`${collection}/`, collection]) register(url);
}

/** Path parameters of `/:id` routes (the id's format is checked by the route: 400 "invalid id"). */
export const idParams = Type.Object({ id: Type.String({ maxLength: 20, description: 'the integer id' }) });

// Security (components.securitySchemes in the document). An API key goes in Authorization, alone
// or as `Bearer <key>`; a browser session is the HttpOnly auth_token cookie.
export const SECURITY_SCHEMES = {
  apiKey: {
    type: 'apiKey',
    in: 'header',
    name: 'Authorization',
    description: 'an API key, sent alone: `Authorization: <key>`',
  },
  bearerApiKey: {
    type: 'http',
    scheme: 'bearer',
    description: 'an API key as a bearer token: `Authorization: Bearer <key>`',
  },
  sessionCookie: {
    type: 'apiKey',
    in: 'cookie',
    name: 'auth_token',
    description: 'the session cookie set by POST /api/auth/login/password',
  },
} as const;

type SecurityRequirements = Record<string, string[]>[];
/** Any credential (the document's default). */
export const SIGNED_IN: SecurityRequirements = [{ apiKey: [] }, { bearerApiKey: [] }, { sessionCookie: [] }];
/** No credential needed. */
export const PUBLIC: SecurityRequirements = [];
/** Works without credentials; some options need them. */
export const OPTIONALLY_SIGNED_IN: SecurityRequirements = [{}, ...SIGNED_IN];
/** Only a session cookie. */
export const SESSION_ONLY: SecurityRequirements = [{ sessionCookie: [] }];

/** The target cluster of a request (also the `x-cluster-name` query parameter or cookie). */
const clusterHeader = objectOf({
  'x-cluster-name': Type.String({
    description: 'the target cluster (else the query parameter, the cookie, the default cluster)',
  }),
});
const clusterCookie = objectOf({
  'x-cluster-name': Type.String({ description: 'the target cluster, as set by the Kite UI' }),
});

/** The `x-cluster-name` query parameter every cluster route accepts (else the header, the cookie, the default). */
export const clusterQueryProperties = { 'x-cluster-name': Type.Optional(Type.String()) };
/** A querystring of only `x-cluster-name`. */
export const ClusterQuery = Type.Object(clusterQueryProperties);

/** The query of Kite's live lists (server-sent events): GET /api/v1/<resource>/<namespace|_all>/watch. */
export const LiveListQuery = Type.Object({
  reduce: Type.Optional(
    stringEnum(['true', 'false'], { description: "trim each object to what Kite's list shows (default false)" }),
  ),
  labelSelector: Type.Optional(Type.String({ maxLength: 4096 })),
  fieldSelector: Type.Optional(Type.String({ maxLength: 4096 })),
  ...clusterQueryProperties,
});

/**
 * A route constraint (Fastify's `constraints`): `{ eventStream: 'yes' }` matches only requests that
 * accept `text/event-stream` (every EventSource sends it). The live list of any resource,
 * /api/v1/<resource>/<namespace>/watch, takes those, and leaves a plain GET of that path to the
 * object named "watch" (the router falls back to /<resource>/<namespace>/<name>).
 */
export const eventStreamConstraint = {
  name: 'eventStream',
  storage<Handler>() {
    const handlers = new Map<string, Handler>();
    return {
      get: (value: string): Handler | null => handlers.get(value) ?? null,
      set: (value: string, handler: Handler) => void handlers.set(value, handler),
    };
  },
  deriveConstraint: (req: { headers: Record<string, string | string[] | undefined> }) =>
    String(req.headers.accept ?? '').includes('text/event-stream') ? 'yes' : 'no',
  mustMatchWhenDerived: false,
  validate(value: unknown) {
    if (value !== 'yes') throw new Error("the eventStream constraint takes 'yes'");
  },
};

/** A live list's answer: events written by the handler as they come, never serialized. */
export function liveListEvents(objects: string) {
  return streamed({
    description: 'the event stream',
    content: {
      'text/event-stream': {
        schema: {
          type: 'string',
          description:
            `server-sent events: \`added\`, \`modified\`, \`deleted\` (${objects}), ` +
            '`error` ({error}), `close` ({message}); a `: ping` comment every 15 s',
        },
      },
    },
  });
}

// ---- Route schemas ---------------------------------------------------------------------------

/**
 * What a route's schema says of that route alone; `schemaOf` and `clusterSchema` add what its group
 * shares. Each part keeps its own type, so the type provider still types request.params, .query
 * and .body, and the handler's answer, from it.
 */
export interface RouteParts {
  description?: string;
  security?: SecurityRequirements;
  params?: TSchema;
  querystring?: TSchema;
  body?: TSchema;
  /** A body the handler checks itself: documented only (plugins/openapi.ts). */
  documentedBody?: object;
  consumes?: readonly string[];
  /** Left out of the OpenAPI document. */
  hide?: boolean;
  /** The success answers by status code (the error answers are added). */
  response: Record<number, TSchema>;
}

/** A route's whole schema: its parts, the group's tags, the summary, every answer. */
export type RouteSchema<P extends RouteParts> = Omit<P, 'response'> & {
  tags: readonly string[];
  summary: string;
  response: Replies<P['response']>;
};

/**
 * The schema builder of a group of routes (their tags in the OpenAPI document):
 * `const schema = schemaOf('users')`, then `schema('Delete a user', { params: idParams, response: { 200: X } })`.
 */
export function schemaOf(...tags: string[]) {
  return <P extends RouteParts>(summary: string, parts: P): RouteSchema<P> => ({
    tags,
    summary,
    ...parts,
    response: { ...parts.response, '4xx': errorRef, '5xx': errorRef },
  });
}

/**
 * The schema builder of a group of routes on the selected cluster: its parts plus the
 * `x-cluster-name` header and cookie that select the cluster (its querystring names the query
 * parameter).
 */
export function clusterSchemaOf(...tags: string[]) {
  const grouped = schemaOf(...tags);
  return <P extends RouteParts>(summary: string, parts: P) => ({
    ...grouped(summary, parts),
    headers: clusterHeader,
    cookies: clusterCookie,
  });
}

/** Whether a route's schema is a cluster route's (clusterSchemaOf): it runs on the selected cluster. */
export function isClusterRoute(schema: unknown): boolean {
  return (schema as { headers?: unknown } | undefined)?.headers === clusterHeader;
}

/** The schema of a route on the selected cluster, tagged `resources`. */
export const clusterSchema = clusterSchemaOf('resources');
