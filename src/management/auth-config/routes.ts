import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import {
  AUTH_CONFIG_DEFAULTS,
  authSettings,
  storedAuthConfig,
  updateAuthConfig,
} from "../../auth/authConfig";
import { HttpError } from "../http";
import { isSecretAuthField } from "../../platform/kek";
import { configDocumentRoutes } from "../configDocument";
import { routeTable } from "../route";
import {
  BOOLEAN_FIELDS,
  ENUM_FIELDS,
  GET_ONLY_FIELDS,
  INTEGER_FIELDS,
  NUMBER_FIELDS,
  PROVIDER_URL_FIELDS,
  STRING_FIELDS,
  UNPROVIDED_PROVIDERS,
  UNPROVIDED_SWITCHES,
  UNSET_FIELDS,
} from "./fields";

export const AUTH_CONFIG_READ = { permission: "auth_config_read", scope: "auth:read" };
const WRITE = { permission: { and: ["auth_config_write", "project_admin_write"] }, scope: "auth:write" };

/** Range checks of the fields whose meaning bounds them; every other field is checked by type only. */
const RANGES: Record<string, [number, number]> = {
  jwt_exp: [30, 604800],
  password_min_length: [6, 72],
  security_refresh_token_reuse_interval: [0, 86400],
  mailer_otp_exp: [1, 86400],
  mailer_otp_length: [6, 10],
  sms_otp_length: [6, 10],
  sms_max_frequency: [0, 32767],
  mfa_phone_max_frequency: [0, 32767],
  smtp_max_frequency: [0, 32767],
};

function integerField(name: string) {
  const [min, max] = RANGES[name] ?? [0, 2147483647];
  return z.number().int().min(min).max(max).nullable().optional();
}

/** The PATCH body: every field of the spec, all optional, typed; unknown and GET-only fields refused. */
const patchBody = z.strictObject({
  ...Object.fromEntries(STRING_FIELDS.map((f) => [f, z.string().max(100_000).nullable().optional()])),
  ...Object.fromEntries(BOOLEAN_FIELDS.map((f) => [f, z.boolean().nullable().optional()])),
  ...Object.fromEntries(INTEGER_FIELDS.map((f) => [f, integerField(f)])),
  ...Object.fromEntries(NUMBER_FIELDS.map((f) => [f, z.number().min(0).nullable().optional()])),
  ...Object.fromEntries(
    Object.entries(ENUM_FIELDS).map(([f, values]) => [f, z.enum(values).nullable().optional()]),
  ),
  // Fixed codes of test numbers: `<number>=<code>` pairs, comma-separated, as the dashboard writes them.
  sms_test_otp: z
    .string()
    .regex(/^([0-9]{1,15}=[0-9]+,?)*$/, {
      error: "sms_test_otp must be <phone>=<otp> pairs separated by commas",
    })
    .nullable()
    .optional(),
  sms_test_otp_valid_until: z.iso.datetime({ offset: true }).nullable().optional(),
  ...Object.fromEntries(
    UNPROVIDED_PROVIDERS.map((p) => [
      `external_${p}_enabled`,
      z
        .literal(false, { error: `Strata does not provide sign-in with ${p}` })
        .nullable()
        .optional(),
    ]),
  ),
});

/** Fields holding a URL: http(s) or empty. */
const URL_FIELDS = ["saml_external_url", ...PROVIDER_URL_FIELDS];

const ALL_FIELDS = [
  ...STRING_FIELDS,
  ...BOOLEAN_FIELDS,
  ...INTEGER_FIELDS,
  ...NUMBER_FIELDS,
  ...Object.keys(ENUM_FIELDS),
  ...Object.keys(GET_ONLY_FIELDS),
];

/**
 * The full auth config: every field of the spec, stored value, else default, else null. The SMTP password
 * and secrets are applied but never answered.
 */
function fullConfig(stored: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries([
    ...ALL_FIELDS.map((f) => [
      f,
      isSecretAuthField(f) ? null : (stored[f] ?? AUTH_CONFIG_DEFAULTS[f] ?? null),
    ]),
    ...UNPROVIDED_SWITCHES.map((f) => [f, false]),
    ...UNSET_FIELDS.map((f) => [f, null]),
  ]);
}

/** The auth config as GET .../config/auth answers it (secrets null). */
export async function authConfig(ctx: AppContext, ref: string): Promise<Record<string, unknown>> {
  return fullConfig(await storedAuthConfig(ctx.platformPool, ref));
}

/** The fields a PATCH names, checked as the platform's auth server checks its config. */
async function checkedChanges(
  ctx: AppContext,
  ref: string,
  body: z.infer<typeof patchBody>,
): Promise<Record<string, unknown>> {
  const changes = Object.fromEntries(
    Object.entries(body).filter(([k, v]) => v !== undefined && !UNPROVIDED_SWITCHES.includes(k)),
  );
  for (const field of URL_FIELDS) {
    const value = changes[field];
    if (typeof value === "string" && value !== "" && !(/^https?:\/\//.test(value) && URL.canParse(value))) {
      throw new HttpError(400, `${field} must be an http(s) URL`);
    }
  }
  // As the platform's auth server validates its config: CAPTCHA on needs a provider secret.
  const merged = { ...(await authSettings(ctx.platformPool, ref)), ...changes };
  if (merged.security_captcha_enabled === true && !String(merged.security_captcha_secret ?? "").trim()) {
    throw new HttpError(400, "security_captcha_secret is required when security_captcha_enabled is true");
  }
  return changes;
}

/** Auth config: read by /auth/v1 on every request, so a change applies at once. */
export function authConfigRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  configDocumentRoutes(routes, {
    path: "/v1/projects/:ref/config/auth",
    store: {
      read: (ref) => storedAuthConfig(ctx.platformPool, ref),
      write: (ref, changes) => updateAuthConfig(ctx.platformPool, ref, changes),
    },
    read: { summary: "Gets the project's auth config", access: AUTH_CONFIG_READ, answer: fullConfig },
    update: {
      method: "patch",
      summary: "Changes auth config fields",
      access: WRITE,
      body: patchBody,
      status: 200,
      changes: (body, { project }) => checkedChanges(ctx, project.ref, body),
      answer: fullConfig,
    },
  });
  return routes.router;
}
