// The shared pieces of the route schemas: the named JSON shapes of the API (ErrorResponse, User,
// Role, APIKey, Cluster, ...; registered with app.addSchema and referenced as `$ref: 'Name#'`), the
// security requirements of the OpenAPI document, and small helpers the route modules use.
//
// Response schemas are also what Fastify serializes with (fast-json-stringify): a property that is
// not listed here is DROPPED from the answer, a null in a `string` property becomes "". So every
// member of every view is listed, nullable ones with type [..., 'null'], and free-form answers
// (Kubernetes objects, whose streams Fastify never re-serializes) are open objects.
import type { FastifyInstance } from 'fastify';

const string = { type: 'string' } as const;
const boolean = { type: 'boolean' } as const;
const integer = { type: 'integer' } as const;
const stringList = { type: 'array', items: string } as const;
const timestamp = { type: 'string', description: 'ISO 8601 UTC date-time' } as const;
const nullableTimestamp = { type: ['string', 'null'], description: 'ISO 8601 UTC date-time, null when never' } as const;

export type SharedSchemaId =
  | 'ErrorResponse'
  | 'User'
  | 'SessionUser'
  | 'Role'
  | 'RoleAssignment'
  | 'APIKey'
  | 'NewAPIKey'
  | 'Cluster'
  | 'ClusterSummary'
  | 'Overview'
  | 'KubernetesObject'
  | 'OpenAPIDocument'
  | 'Message'
  | 'Success';

/** `{ $ref: 'Name#' }`: a reference to one of SHARED_SCHEMAS, for Fastify and the document alike. */
export function ref(id: SharedSchemaId): { $ref: string } {
  return { $ref: `${id}#` };
}

const userProperties = {
  id: integer,
  username: string,
  name: string,
  avatar_url: string,
  provider: { type: 'string', description: '`password` (an API key shown as a user: `api_key`)' },
  enabled: boolean,
  createdAt: timestamp,
  lastLoginAt: nullableTimestamp,
  roles: {
    type: 'array',
    items: { type: 'object', properties: { id: integer, name: string } },
  },
  sidebar_preference: { type: 'string', description: "Kite UI's sidebar layout (JSON text) the user saved, \"\" when none" },
} as const;

const apiKeyProperties = {
  id: integer,
  name: string,
  roles: { ...stringList, description: 'names of the roles the key carries' },
  expiresAt: nullableTimestamp,
  createdAt: timestamp,
} as const;

const resourceAmounts = {
  type: 'object',
  properties: { allocatable: { type: 'number' }, requested: { type: 'number' }, limited: { type: 'number' } },
} as const;

/** The named shapes; `$id` is also their name under components.schemas in the OpenAPI document. */
export const SHARED_SCHEMAS: ({ $id: SharedSchemaId } & Record<string, unknown>)[] = [
  {
    $id: 'ErrorResponse',
    description: 'Every error: a human message, a Kubernetes-style reason and the status code',
    type: 'object',
    required: ['error', 'reason', 'code'],
    properties: {
      error: string,
      reason: { type: 'string', description: 'e.g. BadRequest, Unauthorized, NotFound, AlreadyExists, Conflict, Invalid, BadGateway' },
      code: integer,
      details: { description: "the `details` of a target cluster's Status object, when it sent one" },
    },
  },
  {
    $id: 'User',
    description: 'A user (never a password or hash)',
    type: 'object',
    properties: userProperties,
  },
  {
    $id: 'SessionUser',
    description: 'The caller: a user, or an API key shown as a user with provider `api_key`',
    type: 'object',
    properties: { ...userProperties, createdAt: nullableTimestamp },
  },
  {
    $id: 'Role',
    description: 'A role: anchored glob patterns (`*`, `prod-*`, `!x` excludes) and the users holding it',
    type: 'object',
    properties: {
      id: integer,
      name: string,
      description: string,
      isSystem: { type: 'boolean', description: 'built-in (admin, viewer): cannot be changed or deleted' },
      clusters: stringList,
      namespaces: stringList,
      resources: stringList,
      verbs: stringList,
      createdAt: timestamp,
      assignments: { type: 'array', items: ref('RoleAssignment') },
    },
  },
  {
    $id: 'RoleAssignment',
    description: 'A role held by a user',
    type: 'object',
    properties: { roleId: integer, subjectType: { type: 'string', enum: ['user'] }, subject: { type: 'string', description: 'the username' } },
  },
  {
    $id: 'APIKey',
    description: 'An API key (never its secret)',
    type: 'object',
    properties: { ...apiKeyProperties, lastUsedAt: nullableTimestamp, createdBy: string },
  },
  {
    $id: 'NewAPIKey',
    description: 'A new API key; `key` is the whole value to send as `Authorization: <key>`, shown this once',
    type: 'object',
    properties: { ...apiKeyProperties, key: string },
  },
  {
    $id: 'Cluster',
    description: 'A registered cluster (admin view; `config` is always "")',
    type: 'object',
    properties: {
      id: integer,
      name: string,
      description: string,
      config: { type: 'string', description: 'always "" (the kubeconfig is never shown)' },
      prometheusURL: string,
      inCluster: boolean,
      isDefault: boolean,
      enabled: boolean,
      impersonate: { type: 'boolean', description: 'requests reach the cluster as the caller (Impersonate-User/-Group)' },
      version: { type: 'string', description: 'the gitVersion of the cluster, "" when unknown' },
      ready: boolean,
      error: { type: 'string', description: 'the last connection error, "" when none' },
    },
  },
  {
    $id: 'ClusterSummary',
    description: 'A cluster as any signed-in user sees it',
    type: 'object',
    properties: { name: string, version: string, isDefault: boolean, ready: boolean, error: string },
  },
  {
    $id: 'Overview',
    description: 'The counts on the home page of the selected cluster; CPU and memory in milli-units',
    type: 'object',
    additionalProperties: true,
    properties: {
      totalNodes: integer,
      readyNodes: integer,
      totalPods: integer,
      runningPods: integer,
      totalNamespaces: integer,
      totalServices: integer,
      prometheusEnabled: boolean,
      resource: { type: 'object', properties: { cpu: resourceAmounts, memory: resourceAmounts } },
    },
  },
  {
    $id: 'KubernetesObject',
    description: "The target cluster's answer, passed through unchanged (an object, a List or a stream of watch events)",
    type: 'object',
    additionalProperties: true,
  },
  {
    $id: 'OpenAPIDocument',
    description: 'An OpenAPI 3 document',
    type: 'object',
    additionalProperties: true,
  },
  {
    $id: 'Message',
    description: 'A confirmation',
    type: 'object',
    properties: { message: string },
  },
  {
    $id: 'Success',
    description: 'A confirmation',
    type: 'object',
    properties: { success: boolean },
  },
];

export function registerSharedSchemas(app: FastifyInstance): void {
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
}

/** A route's responses: its success answers plus the one error shape for every 4xx and 5xx. */
export function replies(success: Record<number, object>): Record<string, object> {
  return { ...success, '4xx': ref('ErrorResponse'), '5xx': ref('ErrorResponse') };
}

/** A 204 answer: no body. */
export function noContent(description: string): object {
  return { description, type: 'null' };
}

/** An object answer with the given members (listed so the serializer keeps them). */
export function objectOf(properties: Record<string, object>, description?: string): object {
  return { type: 'object', ...(description ? { description } : {}), properties };
}

/**
 * The members of Kite's ResourceHistory, which both its audit-log page and its history tab read
 * (routes/audit-logs.ts, routes/history.ts); `yamlDescriptions` says what the two YAML members hold there.
 */
export function resourceHistoryProperties(yamlDescriptions: { resourceYaml: string; previousYaml: string }): Record<string, object> {
  const string = { type: 'string' };
  return {
    id: { type: 'integer' },
    createdAt: { type: 'string', format: 'date-time', description: 'when the action began' },
    updatedAt: { type: 'string', format: 'date-time', description: 'when it ended, else createdAt' },
    clusterName: string,
    resourceType: string,
    resourceName: string,
    namespace: string,
    operationType: string,
    resourceYaml: { type: 'string', description: yamlDescriptions.resourceYaml },
    previousYaml: { type: 'string', description: yamlDescriptions.previousYaml },
    success: { type: 'boolean' },
    errorMessage: string,
    operatorId: { type: 'integer' },
  };
}

/** Path parameters of `/:id` routes (the id's format is checked by the route: 400 "invalid id"). */
export const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', maxLength: 20, description: 'the integer id' } },
} as const;

// Security (components.securitySchemes in the document). An API key goes in Authorization, alone
// or as `Bearer <key>`; a browser session is the HttpOnly auth_token cookie.
export const SECURITY_SCHEMES = {
  apiKey: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'an API key, sent alone: `Authorization: <key>`' },
  bearerApiKey: { type: 'http', scheme: 'bearer', description: 'an API key as a bearer token: `Authorization: Bearer <key>`' },
  sessionCookie: { type: 'apiKey', in: 'cookie', name: 'auth_token', description: 'the session cookie set by POST /api/auth/login/password' },
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
export const clusterHeader = {
  type: 'object',
  properties: {
    'x-cluster-name': { type: 'string', description: 'the target cluster (else the query parameter, the cookie, the default cluster)' },
  },
} as const;
export const clusterCookie = {
  type: 'object',
  properties: { 'x-cluster-name': { type: 'string', description: 'the target cluster, as set by the Kite UI' } },
} as const;
