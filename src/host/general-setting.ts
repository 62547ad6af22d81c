// The general settings store: Kite's "general setting" (its UI's Settings → General, and the
// password-login switch of Settings → Authentication) as the one GeneralSetting named `general`
// (setting-store.ts), with the AI provider's API key in the owned Secret `kiteline-general-setting`
// (key aiApiKey): write-only, no answer carries it, only whether one is stored. The rules are
// Kite's (pkg/ai/handler.go), with kiteline's: members absent from a change keep their value, the
// key is never sent anywhere new without being given again, and password login is not switched off
// while nothing else signs anyone in. Also the global sidebar layout of Kite's UI.
import { BadRequestError } from '../errors.js';
import { checkUrl } from './oauth-providers.js';
import type { GeneralSettingResource, GeneralSettingSpec } from './resources.js';
import { SettingStore } from './setting-store.js';
import type { HostStore } from './store.js';

export const GENERAL_SETTING_NAME = 'general';
export const AI_KEY_SECRET = 'kiteline-general-setting';
const AI_KEY = 'aiApiKey';

export const AI_PROVIDERS = ['openai', 'anthropic'] as const;
export type AiProvider = (typeof AI_PROVIDERS)[number];
/** Kite's default model of each provider. */
const DEFAULT_MODELS: Record<AiProvider, string> = { openai: 'gpt-4o-mini', anthropic: 'claude-sonnet-4-5' };
const DEFAULT_MAX_TOKENS = 4096;
const DEFAULT_KUBECTL_IMAGE = 'zzde/kubectl:latest';
const DEFAULT_NODE_TERMINAL_IMAGE = 'busybox:latest';
/** An image reference: printable ASCII without spaces. */
const IMAGE = /^[\x21-\x7e]{1,255}$/;

/** The settings as Kite's UI reads them (defaults filled in), and whether an AI key is stored. */
export interface GeneralSettings {
  aiAgentEnabled: boolean;
  aiProvider: AiProvider;
  aiModel: string;
  aiApiKeyConfigured: boolean;
  aiBaseUrl: string;
  aiMaxTokens: number;
  kubectlEnabled: boolean;
  kubectlImage: string;
  nodeTerminalImage: string;
  enableAnalytics: boolean;
  enableVersionCheck: boolean;
  passwordLoginDisabled: boolean;
  requireMFA: boolean;
}

/** A change: the members given; `aiApiKey` absent or "" keeps the stored key. */
export type GeneralSettingInput = Omit<
  GeneralSettingSpec,
  'aiProvider' | 'aiApiKeySecretRef' | 'globalSidebarPreference'
> & { aiProvider?: string; aiApiKey?: string };

/** What GET /api/v1/ai/status tells every signed-in user: never the key. */
export type AiStatus = { enabled: false } | { enabled: true; provider: AiProvider; model: string };

const BOOLEANS = [
  'aiAgentEnabled',
  'kubectlEnabled',
  'enableAnalytics',
  'enableVersionCheck',
  'passwordLoginDisabled',
  'requireMFA',
] as const;

/**
 * The settings a spec says, defaults filled in. Decision: kubectlEnabled, enableAnalytics and
 * enableVersionCheck default to false (Kite: true), because that is what kiteline does: it has no
 * kubectl console, sends no analytics and never looks for new versions.
 */
function settingsOf(spec: GeneralSettingSpec, aiApiKeyConfigured: boolean): GeneralSettings {
  const aiProvider: AiProvider = spec.aiProvider === 'anthropic' ? 'anthropic' : 'openai';
  return {
    aiAgentEnabled: spec.aiAgentEnabled ?? false,
    aiProvider,
    aiModel: spec.aiModel || DEFAULT_MODELS[aiProvider],
    aiApiKeyConfigured,
    aiBaseUrl: spec.aiBaseUrl ?? '',
    aiMaxTokens: spec.aiMaxTokens && spec.aiMaxTokens > 0 ? spec.aiMaxTokens : DEFAULT_MAX_TOKENS,
    kubectlEnabled: spec.kubectlEnabled ?? false,
    kubectlImage: spec.kubectlImage || DEFAULT_KUBECTL_IMAGE,
    nodeTerminalImage: spec.nodeTerminalImage || DEFAULT_NODE_TERMINAL_IMAGE,
    enableAnalytics: spec.enableAnalytics ?? false,
    enableVersionCheck: spec.enableVersionCheck ?? false,
    passwordLoginDisabled: spec.passwordLoginDisabled ?? false,
    requireMFA: spec.requireMFA ?? false,
  };
}

function checkImage(field: string, value: string): void {
  if (!IMAGE.test(value)) throw new BadRequestError(`${field} must be an image reference (no spaces, at most 255)`);
}

export class GeneralSettingStore extends SettingStore<GeneralSettingSpec, GeneralSettingResource> {
  constructor(
    host: HostStore,
    /** Someone can sign in without a password: an enabled OAuth provider, or an LDAP directory. */
    private readonly otherSignIn: () => boolean,
  ) {
    super(host, {
      plural: 'generalsettings',
      kind: 'GeneralSetting',
      name: GENERAL_SETTING_NAME,
      noun: 'general settings',
      cache: (h) => h.generalSettings,
    });
  }

  private keyOf(spec: GeneralSettingSpec | undefined): string | undefined {
    return this.secretValue(spec?.aiApiKeySecretRef?.name, AI_KEY) || undefined;
  }

  settings(): GeneralSettings {
    const spec = this.object()?.spec ?? {};
    return settingsOf(spec, this.keyOf(spec) !== undefined);
  }

  /** Kite's rule: the assistant is on when switched on and a key is stored. */
  aiStatus(): AiStatus {
    const s = this.settings();
    return s.aiAgentEnabled && s.aiApiKeyConfigured
      ? { enabled: true, provider: s.aiProvider, model: s.aiModel }
      : { enabled: false };
  }

  /** Password users must sign in with a second factor (docs/second-factors.md). */
  requireMFA(): boolean {
    return this.object()?.spec?.requireMFA === true;
  }

  passwordLoginDisabled(): boolean {
    return this.object()?.spec?.passwordLoginDisabled === true;
  }

  /** The sidebar layout for everyone (JSON text), "" when none is set. */
  globalSidebarPreference(): string {
    return this.object()?.spec?.globalSidebarPreference?.trim() ?? '';
  }

  /**
   * Changes the members given (Kite's rules: "" for aiModel, kubectlImage and nodeTerminalImage
   * means the default, aiMaxTokens 0 means 4096, an unknown aiProvider is 400, the AI needs a key,
   * kubectl needs an image); 400 for anything else wrong, and then nothing is written.
   */
  async update(input: GeneralSettingInput): Promise<GeneralSettings> {
    await this.write((live) => {
      const spec = live?.spec ?? {};
      const storedKey = this.keyOf(spec);
      const current = settingsOf(spec, storedKey !== undefined);
      const next: GeneralSettings = { ...current };
      for (const field of BOOLEANS) if (input[field] !== undefined) next[field] = input[field];
      if (input.aiProvider !== undefined && input.aiProvider.trim() !== '') {
        const provider = input.aiProvider.trim().toLowerCase();
        if (!(AI_PROVIDERS as readonly string[]).includes(provider))
          throw new BadRequestError(`aiProvider must be one of ${AI_PROVIDERS.join(', ')}`);
        next.aiProvider = provider as AiProvider;
      }
      if (input.aiModel !== undefined) next.aiModel = input.aiModel.trim() || DEFAULT_MODELS[next.aiProvider];
      if (input.aiBaseUrl !== undefined) {
        next.aiBaseUrl = input.aiBaseUrl.trim();
        checkUrl('aiBaseUrl', next.aiBaseUrl, false);
      }
      if (input.aiMaxTokens !== undefined)
        next.aiMaxTokens = input.aiMaxTokens > 0 ? input.aiMaxTokens : DEFAULT_MAX_TOKENS;
      if (input.kubectlImage !== undefined) {
        const image = input.kubectlImage.trim();
        if (image === '' && next.kubectlEnabled)
          throw new BadRequestError('kubectlImage is required when kubectlEnabled is true');
        next.kubectlImage = image || DEFAULT_KUBECTL_IMAGE;
      }
      if (input.nodeTerminalImage !== undefined && input.nodeTerminalImage.trim() !== '')
        next.nodeTerminalImage = input.nodeTerminalImage.trim();
      checkImage('kubectlImage', next.kubectlImage);
      checkImage('nodeTerminalImage', next.nodeTerminalImage);

      const newKey = input.aiApiKey?.trim() || undefined;
      if (next.aiAgentEnabled && !newKey && !storedKey)
        throw new BadRequestError('aiApiKey is required when aiAgentEnabled is true');
      if (storedKey && !newKey && next.aiBaseUrl !== current.aiBaseUrl)
        throw new BadRequestError('changing aiBaseUrl sends the AI API key somewhere new: give aiApiKey again');
      if (next.passwordLoginDisabled && !current.passwordLoginDisabled && !this.otherSignIn())
        throw new BadRequestError(
          'password login cannot be disabled while nothing else signs anyone in: ' +
            'enable an OAuth provider or LDAP first',
        );

      // A new key goes to kiteline's own Secret, never into one a reference applied with kubectl names.
      const keyRef = newKey ? { name: AI_KEY_SECRET } : spec.aiApiKeySecretRef;
      const members: Omit<GeneralSettings, 'aiApiKeyConfigured'> & { aiApiKeyConfigured?: boolean } = { ...next };
      delete members.aiApiKeyConfigured;
      return {
        spec: { ...spec, ...members, ...(keyRef ? { aiApiKeySecretRef: keyRef } : {}) },
        ...(newKey ? { secret: { name: AI_KEY_SECRET, values: { [AI_KEY]: newKey } } } : {}),
      };
    });
    return this.settings();
  }

  /** Sets the sidebar layout for everyone ("" removes it). */
  async setGlobalSidebarPreference(text: string): Promise<void> {
    await this.write((live) => {
      const spec = live?.spec ?? {};
      if ((spec.globalSidebarPreference ?? '') === text) return undefined;
      return { spec: { ...spec, globalSidebarPreference: text } };
    });
  }
}
