import type { AuthCall } from "../call";
import { publishedJwks } from "../signingKeys";

/** What the auth server tells any client about itself: its public keys and the providers switched on. */

const JWKS_MAX_AGE_SECONDS = 600;

/** GET /.well-known/jwks.json: the project's published signing keys (no API key needed). */
export async function jwks({ project, res }: AuthCall) {
  res.set("Cache-Control", `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
  return { keys: await publishedJwks(project.platformPool, project.ref) };
}

/** The providers the platform's settings name under `external`, each switched by `external_<name>_enabled`. */
const SETTINGS_PROVIDERS = [
  "apple",
  "azure",
  "bitbucket",
  "discord",
  "facebook",
  "snapchat",
  "figma",
  "fly",
  "github",
  "gitlab",
  "google",
  "keycloak",
  "kakao",
  "linkedin",
  "linkedin_oidc",
  "notion",
  "spotify",
  "slack",
  "slack_oidc",
  "workos",
  "twitch",
  "twitter",
  "zoom",
];

/** GET /settings: which sign-in methods the project allows, as auth-js reads them. */
export async function publicSettings({ settings: s }: AuthCall) {
  const external = Object.fromEntries(
    SETTINGS_PROVIDERS.map((name) => [name, s[`external_${name}_enabled`] === true]),
  );
  return {
    external: {
      ...external,
      email: s.external_email_enabled !== false,
      phone: s.external_phone_enabled === true,
      anonymous_users: s.external_anonymous_users_enabled === true,
    },
    disable_signup: Boolean(s.disable_signup),
    mailer_autoconfirm: Boolean(s.mailer_autoconfirm),
    phone_autoconfirm: Boolean(s.sms_autoconfirm),
    sms_provider: String(s.sms_provider ?? ""),
    saml_enabled: Boolean(s.saml_enabled),
  };
}
