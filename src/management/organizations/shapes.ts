import { z } from "zod";
import { PLANS } from "../billing/plans";
import { ROLE_NAMES } from "./roles";
import type { MemberRow } from "./store";

export const createOrganizationBody = z.object({
  name: z.string().trim().min(1, "must not be empty").max(256),
});

export const organizationSummary = z.object({ id: z.string(), slug: z.string(), name: z.string() });

export const organizationDetail = z.object({
  id: z.string(),
  name: z.string(),
  plan: z.enum(PLANS),
  opt_in_tags: z.array(z.string()),
  allowed_release_channels: z.array(z.string()),
});

export const entitlementsResponse = z.object({
  entitlements: z.array(
    z.object({
      feature: z.object({ key: z.string(), type: z.string() }),
      hasAccess: z.boolean(),
      type: z.string(),
      /** `value` for numeric entitlements (log.retention_days). */
      config: z.object({ enabled: z.boolean(), value: z.number().optional() }),
    }),
  ),
});

export const memberV1 = z.object({
  user_id: z.string(),
  user_name: z.string(),
  email: z.string(),
  role_name: z.string(),
  mfa_enabled: z.boolean(),
  avatar_url: z.string(),
});

export function memberV1Of(m: MemberRow): z.infer<typeof memberV1> {
  return {
    user_id: m.user_id,
    user_name: m.username,
    email: m.email,
    role_name: m.role_name,
    mfa_enabled: false,
    avatar_url: "",
  };
}

const roleName = z.enum(ROLE_NAMES);

export const inviteMemberBody = z.object({ email: z.email().max(320), role_name: roleName }).strict();

export const updateMemberBody = z.object({ role_name: roleName }).strict();

export const invitation = z.object({
  id: z.string(),
  email: z.string(),
  role_name: z.string(),
  invited_at: z.string(),
  expires_at: z.string(),
  /** Whether the link went by mail; else the answer to the invitation carried it, once. */
  mailed: z.boolean(),
});

/** The answer to an invitation: the link only when no mail carried it (no SMTP server is configured). */
export const createdInvitation = invitation.extend({ invitation_link: z.string().optional() });

const projectRef = z.object({ ref: z.string(), name: z.string() });

const links = z.object({
  first: z.string().nullable(),
  prev: z.string().nullable(),
  next: z.string().nullable(),
  last: z.string().nullable(),
});

export const memberV2 = z.object({
  type: z.literal("organization_member"),
  id: z.string(),
  attributes: z.object({
    username: z.string(),
    primary_email: z.string(),
    mfa_enabled: z.boolean(),
    is_sso_user: z.boolean(),
    avatar_url: z.string(),
    roles: z.array(
      z.object({ id: z.number().int(), name: z.string(), scope: z.string(), projects: z.array(projectRef) }),
    ),
  }),
});

export const roleV2 = z.object({
  type: z.literal("organization_role"),
  id: z.string(),
  attributes: z.object({
    name: z.string(),
    scope: z.string(),
    base_role_id: z.number().int(),
    projects: z.array(projectRef),
  }),
});

export const membersV2Response = z.object({ data: z.array(memberV2), links });
export const rolesV2Response = z.object({ data: z.array(roleV2), links });

/**
 * JSON:API-style cursor pagination: `page[size]`, `page[before]`, `page[after]` (the query parser keeps the
 * bracketed names as they are). `filter[...]` parameters are accepted.
 */
export const cursorPageQuery = z
  .object({
    "page[size]": z.coerce.number().int().min(1).max(100).default(20),
    "page[before]": z.string().min(1).optional(),
    "page[after]": z.string().min(1).optional(),
  })
  .refine((q) => !(q["page[before]"] && q["page[after]"]), {
    message: "page[before] and page[after] cannot be combined",
    path: ["page[before]"],
  });
export type CursorPage = z.infer<typeof cursorPageQuery>;
