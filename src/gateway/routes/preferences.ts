// POST /api/users/sidebar_preference {sidebar_preference: "<JSON text>"} → {success: true}: the
// signed-in user saves the layout of Kite UI's sidebar on their own User (spec.sidebarPreference);
// GET /api/auth/user answers it back as `sidebar_preference` (Kite's UI reads it there). At most
// 16 KiB, JSON text of an object (the UI parses it on every load) or "" to forget it. Only a
// user's session can save one: an API key has no User to keep it on (400). While an admin has set
// a global sidebar (routes/settings.ts), only admins keep their own (others: 403, as in Kite).
import { Type } from 'typebox';
import { BadRequestError, ForbiddenError, UnauthorizedError } from '../../errors.js';
import { objectOf, schemaOf, type App } from '../schemas.js';

/** A saved sidebar preference at most, in bytes of UTF-8 (the CRD allows as many characters). */
export const MAX_SIDEBAR_PREFERENCE_BYTES = 16 * 1024;

/** 400 unless the preference is "" or the JSON text of an object, within the size limit. */
export function checkPreference(text: string): void {
  if (Buffer.byteLength(text, 'utf8') > MAX_SIDEBAR_PREFERENCE_BYTES) {
    throw new BadRequestError(`sidebar_preference is larger than ${MAX_SIDEBAR_PREFERENCE_BYTES} bytes`);
  }
  if (text === '') return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BadRequestError('sidebar_preference must be JSON text (of an object), or "" to forget it');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new BadRequestError('sidebar_preference must be the JSON text of an object');
}

export const SidebarPreferenceBody = Type.Object(
  {
    sidebar_preference: Type.String({
      maxLength: MAX_SIDEBAR_PREFERENCE_BYTES,
      description: 'JSON text of an object, at most 16 KiB; "" forgets it',
    }),
  },
  { additionalProperties: false },
);

export default async function preferenceRoutes(app: App) {
  const { users, auth, generalSettings } = app.services;

  app.post(
    '/api/users/sidebar_preference',
    {
      onRequest: app.requireUser,
      schema: schemaOf('auth')("Save the caller's own sidebar layout of Kite's UI (read back in GET /api/auth/user)", {
        body: SidebarPreferenceBody,
        response: { 200: objectOf({ success: Type.Boolean() }) },
      }),
    },
    async (request) => {
      const principal = request.principal!;
      if (principal.kind !== 'user')
        throw new BadRequestError('a sidebar preference is kept on a user: sign in with a session, not an API key');
      // Kite's rule: a global sidebar (an admin's) is everyone's but admins'.
      if (generalSettings.globalSidebarPreference() !== '' && !auth.isAdmin(principal))
        throw new ForbiddenError('sidebar customization is disabled by global sidebar');
      const preference = request.body.sidebar_preference;
      checkPreference(preference);
      const user = users.byId(principal.id);
      if (!user) throw new UnauthorizedError('user not found');
      await users.update(user, { sidebarPreference: preference });
      return { success: true };
    },
  );
}
