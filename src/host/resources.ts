// TypeScript shapes of kiteline's custom resources (crds/*.yaml is the source of truth).
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';

export const GROUP = 'kiteline.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Label holding the integer id of a User, Cluster, Role or APIKey. */
export const ID_LABEL = 'kiteline.io/id';
/** Label on Secrets and objects that kiteline created itself. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'kiteline';

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

/** Any kiteline custom resource as read back from the API server (it always has a name). */
export interface KiteResource extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string };
}

interface Resource<Spec, Status> extends KiteResource {
  spec: Spec;
  status?: Status;
}

export interface UserSpec {
  username: string;
  name?: string;
  avatarURL?: string;
  /** Kite UI's sidebar layout, JSON text the user saved (POST /api/users/sidebar_preference). */
  sidebarPreference?: string;
  /** Always "password" here: a user of an identity provider carries the label kiteline.io/provider (users.ts). */
  provider?: 'password';
  enabled?: boolean;
  roles?: string[];
  passwordSecretRef?: { name: string };
}
export interface UserStatus {
  lastLoginAt?: string;
  conditions?: Condition[];
}
export type UserResource = Resource<UserSpec, UserStatus>;

export interface ClusterSpec {
  name?: string;
  description?: string;
  prometheusURL?: string;
  inCluster?: boolean;
  isDefault?: boolean;
  enabled?: boolean;
  impersonate?: boolean;
  kubeconfigSecretRef?: { name: string; key?: string };
}
export interface ClusterStatus {
  ready?: boolean;
  version?: string;
  error?: string;
  observedGeneration?: number;
  lastProbeTime?: string;
  conditions?: Condition[];
}
export type ClusterResource = Resource<ClusterSpec, ClusterStatus>;

export interface RoleSpec {
  name?: string;
  description?: string;
  clusters?: string[];
  namespaces?: string[];
  resources?: string[];
  verbs?: string[];
  /**
   * A holder needs a second factor proved at most this many minutes ago for the actions a fresh
   * factor guards, on the clusters this role reaches (docs/second-factors.md).
   */
  stepUpMinutes?: number;
  /** What the role lets an AI agent do through /mcp beyond its rules (docs/mcp.md). */
  mcp?: RoleMcpRules;
}

/** A role's rules for AI agents (/mcp); absent: every tool its rules allow, writes confirmed. */
export interface RoleMcpRules {
  /** Tools (patterns) an agent of a holder never gets, whatever another role says. */
  denyTools?: string[];
  /** Resources (patterns, as in `resources`) an agent of a holder never reads or writes. */
  denyResources?: string[];
  /** false: the writes this role grants run without asking a human (never on a production cluster). */
  confirmWrites?: boolean;
}
export type RoleResource = Resource<RoleSpec, { conditions?: Condition[] }>;

export interface APIKeySpec {
  name?: string;
  roles?: string[];
  expiresAt?: string | null;
  createdBy?: string;
  /**
   * The user a key acts for (kubeconfig tokens): it works only while that user (the same id: a
   * re-created username is another user) exists, is enabled and holds every role of the key.
   */
  owner?: APIKeyOwner;
  /** What a key with an owner is for (absent: `kubernetes`, a kubeconfig token). */
  audience?: TokenAudience;
  /**
   * A console token's clusters, the only ones it reaches (one read out of the console's pod opens no
   * other cluster); a console token without them opens nothing.
   */
  clusters?: string[];
  /**
   * With an owner: when the session it was minted from last proved a second factor (RFC 3339);
   * fresh-factor rules count from it (docs/second-factors.md).
   */
  secondFactorAt?: string;
  secretRef: { name: string };
}
/**
 * What a token minted for a user is for: the Kubernetes API (a kubeconfig), /mcp (an agent), or a
 * kubectl console (the Kubernetes API of the clusters in spec.clusters only; a release that does not
 * know `console` refuses the token rather than take it for an unbound kubeconfig token).
 */
export type TokenAudience = 'kubernetes' | 'mcp' | 'console';
export interface APIKeyOwner {
  username: string;
  id: number;
}
export interface APIKeyStatus {
  lastUsedAt?: string;
  conditions?: Condition[];
}
export type APIKeyResource = Resource<APIKeySpec, APIKeyStatus>;

export interface OAuthProviderSpec {
  name: string;
  clientId: string;
  clientSecretRef?: { name: string };
  issuer: string;
  authUrl?: string;
  tokenUrl?: string;
  userInfoUrl?: string;
  scopes?: string;
  usernameClaim?: string;
  groupsClaim?: string;
  /** Kite's: comma-separated groups (of groupsClaim), one of which a user must be in to sign in; "" for anyone. */
  allowedGroups?: string;
  enabled?: boolean;
}
export type OAuthProviderResource = Resource<OAuthProviderSpec, { conditions?: Condition[] }>;

/** The integer id of a resource from its label, or undefined when not yet assigned. */
export function resourceId(obj: KubernetesObject): number | undefined {
  const raw = obj.metadata?.labels?.[ID_LABEL];
  return raw && /^[1-9]\d*$/.test(raw) ? Number(raw) : undefined;
}

/**
 * Kite's general settings (Settings → General and Authentication): one GeneralSetting named
 * `general` (host/general-setting.ts); the AI API key lives in the Secret of aiApiKeySecretRef.
 */
export interface GeneralSettingSpec {
  aiAgentEnabled?: boolean;
  aiProvider?: 'openai' | 'anthropic';
  aiModel?: string;
  aiApiKeySecretRef?: { name: string };
  aiBaseUrl?: string;
  aiMaxTokens?: number;
  kubectlEnabled?: boolean;
  kubectlImage?: string;
  nodeTerminalImage?: string;
  enableAnalytics?: boolean;
  enableVersionCheck?: boolean;
  passwordLoginDisabled?: boolean;
  /** Password users must sign in with a second factor (docs/second-factors.md). */
  requireMFA?: boolean;
  /** Kite UI's sidebar layout for everyone (JSON text), "" or absent: none. */
  globalSidebarPreference?: string;
}
export type GeneralSettingResource = Resource<GeneralSettingSpec, { conditions?: Condition[] }>;

/**
 * The LDAP directory configured from Kite's UI (or kubectl): one LDAPSetting named `ldap`
 * (host/ldap-setting.ts); the service account's password lives in the Secret of
 * bindPasswordSecretRef (key `password`).
 */
export interface LdapSettingSpec {
  enabled?: boolean;
  serverUrl?: string;
  useStartTLS?: boolean;
  /** PEM of the CA that signed the directory's certificate; absent: the system CAs. */
  caCert?: string;
  bindDn?: string;
  bindPasswordSecretRef?: { name: string };
  userBaseDn?: string;
  userFilter?: string;
  usernameAttribute?: string;
  displayNameAttribute?: string;
  groupBaseDn?: string;
  groupFilter?: string;
  groupNameAttribute?: string;
}
export type LdapSettingResource = Resource<LdapSettingSpec, { conditions?: Condition[] }>;

/** A user's passkey (crds/passkeys.kiteline.io.yaml): the public half of a WebAuthn credential. */
export interface PasskeySpec {
  userId: number;
  username: string;
  name: string;
  /** base64url */
  credentialId: string;
  /** COSE public key, base64url. */
  publicKey: string;
  counter?: number;
  transports?: string[];
  deviceType?: 'singleDevice' | 'multiDevice';
  backedUp?: boolean;
}
export type PasskeyResource = Resource<PasskeySpec, { counter?: number; lastUsedAt?: string }>;

/** A challenge that was answered (crds/usedchallenges.kiteline.io.yaml), kept until it would expire. */
export type UsedChallengeResource = Resource<{ purpose: string; userId?: number; expiresAt: string }, never>;
