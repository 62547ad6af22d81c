// Kite's settings (docs/tools.md, "Settings"): GET|PUT /api/v1/admin/general-setting[/] (its UI's
// Settings → General, and the password-login switch of Settings → Authentication; admins only),
// POST|DELETE /api/v1/admin/sidebar_preference/global (the sidebar layout for everyone; every
// user reads it in GET /api/auth/user), and GET /api/v1/ai/status for every signed-in user
// (whether Kite's UI shows its AI assistant). The AI API key is write-only: answers say only
// whether one is stored (`aiApiKey` is always ""). The rules are the store's (host/general-setting.ts).
import { Type } from 'typebox';
import { BadRequestError } from '../../errors.js';
import { AI_PROVIDERS, type GeneralSettings } from '../../host/general-setting.js';
import { acceptEmptyJsonBody } from '../empty-json-body.js';
import { bothSlashes, ref, schemaOf, stringEnum, type App } from '../schemas.js';
import { checkPreference, SidebarPreferenceBody } from './preferences.js';

const schema = schemaOf('settings');
const GENERAL_SETTING = '/api/v1/admin/general-setting';
const GLOBAL_SIDEBAR = '/api/v1/admin/sidebar_preference/global';

const image = (description: string) => Type.String({ maxLength: 255, description });

/** Kite's general setting, every member always there. */
const GeneralSetting = Type.Object(
  {
    aiAgentEnabled: Type.Boolean(),
    aiProvider: stringEnum(AI_PROVIDERS),
    aiModel: Type.String(),
    aiApiKey: Type.String({ description: 'always "" (the key is never shown)' }),
    aiApiKeyConfigured: Type.Boolean({ description: 'an AI API key is stored' }),
    aiBaseUrl: Type.String({ description: '"" for the provider\'s default' }),
    aiMaxTokens: Type.Integer(),
    kubectlEnabled: Type.Boolean({
      description: "Kite UI's kubectl console (GET /api/v1/kubectl-terminal/ws; docs/workloads.md)",
    }),
    kubectlImage: Type.String(),
    nodeTerminalImage: Type.String({ description: "stored for Kite's UI; kiteline's node terminal has its own image" }),
    enableAnalytics: Type.Boolean({ description: "stored for Kite's UI; kiteline sends no analytics" }),
    enableVersionCheck: Type.Boolean({ description: "stored for Kite's UI; kiteline never looks for new versions" }),
    passwordLoginDisabled: Type.Boolean({ description: 'POST /api/auth/login/password answers 403' }),
    requireMFA: Type.Boolean({
      description:
        'password users must sign in with a second factor; one without enrols first (docs/second-factors.md)',
    }),
  },
  { description: "Kite's general settings (never the AI API key)" },
);

const GeneralSettingBody = Type.Object(
  {
    aiAgentEnabled: Type.Optional(Type.Boolean({ description: 'needs an AI API key (given now, or stored)' })),
    aiProvider: Type.Optional(
      Type.String({ maxLength: 50, description: `${AI_PROVIDERS.join(' or ')}; "" keeps the current one` }),
    ),
    aiModel: Type.Optional(Type.String({ maxLength: 255, description: '"" for the provider\'s default model' })),
    aiApiKey: Type.Optional(
      Type.String({ maxLength: 4096, description: 'write-only; absent or "" keeps the stored one' }),
    ),
    aiBaseUrl: Type.Optional(
      Type.String({
        maxLength: 2048,
        description: 'https (http only on localhost), "" for the default; a change needs aiApiKey again',
      }),
    ),
    aiMaxTokens: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: '0 for 4096' })),
    kubectlEnabled: Type.Optional(Type.Boolean()),
    kubectlImage: Type.Optional(image('"" for the default (refused while kubectlEnabled)')),
    nodeTerminalImage: Type.Optional(image('"" keeps the current one')),
    enableAnalytics: Type.Optional(Type.Boolean()),
    enableVersionCheck: Type.Optional(Type.Boolean()),
    passwordLoginDisabled: Type.Optional(
      Type.Boolean({ description: 'refused while no OAuth provider is enabled and no LDAP directory is configured' }),
    ),
    requireMFA: Type.Optional(Type.Boolean()),
    // Kite's UI sends back the object it read: its read-only member is accepted and ignored.
    aiApiKeyConfigured: Type.Optional(Type.Unknown({ description: 'read-only: ignored' })),
  },
  { additionalProperties: false },
);

const AiStatus = Type.Object(
  {
    enabled: Type.Boolean({ description: 'an AI provider is configured (switched on, and a key is stored)' }),
    provider: Type.Optional(stringEnum(AI_PROVIDERS)),
    model: Type.Optional(Type.String()),
  },
  { description: "Whether Kite's UI offers its AI assistant (never the key)" },
);

/** The JSON of the settings: Kite's shape, the key never in it. */
function generalSettingView(settings: GeneralSettings) {
  return { ...settings, aiApiKey: '' };
}

export default async function settingRoutes(app: App) {
  const { generalSettings } = app.services;
  // Kite's UI deletes the global sidebar with Content-Type application/json and no body.
  acceptEmptyJsonBody(app);

  const getRoute = {
    schema: schema("Kite's general settings (never the AI API key)", {
      response: { 200: GeneralSetting },
    }),
  };
  bothSlashes(GENERAL_SETTING, (url) =>
    app.get(url, getRoute, async () => generalSettingView(generalSettings.settings())),
  );

  const putRoute = {
    schema: schema("Change Kite's general settings (absent members are kept)", {
      description:
        'An unknown `aiProvider`, `aiAgentEnabled` without a key, `kubectlEnabled` with an empty `kubectlImage`, a ' +
        'new `aiBaseUrl` without the key again, or switching password login off while nothing else signs anyone ' +
        'in: 400, and nothing changes.',
      body: GeneralSettingBody,
      response: { 200: GeneralSetting },
    }),
  };
  bothSlashes(GENERAL_SETTING, (url) =>
    app.put(url, putRoute, async (request) => {
      const { aiApiKeyConfigured: _readOnly, ...input } = request.body;
      return generalSettingView(await generalSettings.update(input));
    }),
  );

  app.get(
    '/api/v1/ai/status',
    {
      onRequest: app.requireUser,
      schema: schema("Whether Kite's AI assistant is configured", {
        description:
          '`{enabled: false}` unless an AI provider is switched on and its key stored (Settings → General); then ' +
          'also its `provider` and `model`. kiteline serves no AI chat.',
        response: { 200: AiStatus },
      }),
    },
    async () => generalSettings.aiStatus(),
  );
  app.post(
    GLOBAL_SIDEBAR,
    {
      schema: schema("Set Kite UI's sidebar layout for everyone", {
        description:
          'Every user but admins gets it as their `sidebar_preference` (GET /api/auth/user), and may no longer ' +
          'save their own (403); an admin gets it while they have none of their own. JSON text of an object, at ' +
          'most 16 KiB.',
        body: SidebarPreferenceBody,
        response: { 200: ref('Success') },
      }),
    },
    async (request) => {
      const text = request.body.sidebar_preference;
      if (text.trim() === '')
        throw new BadRequestError('sidebar_preference is required (DELETE removes the global sidebar)');
      checkPreference(text);
      await generalSettings.setGlobalSidebarPreference(text);
      return { success: true };
    },
  );

  app.delete(
    GLOBAL_SIDEBAR,
    {
      schema: schema('Remove the global sidebar layout (everyone keeps their own again)', {
        response: { 200: ref('Success') },
      }),
    },
    async () => {
      await generalSettings.setGlobalSidebarPreference('');
      return { success: true };
    },
  );
}
