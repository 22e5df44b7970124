import { z } from "zod";
import { checkCidr } from "../../net/cidr";
import { HttpError } from "../http";

/** The platform's role names a member may be given. */
export const ROLES = [
  "postgres",
  "supabase_read_only_user",
  "anon",
  "authenticated",
  "service_role",
] as const;

const cidrItems = (family: 4 | 6) =>
  z
    .array(
      z.object({
        cidr: z.string().superRefine((value, check) => {
          const problem = checkCidr(value, family);
          if (problem) check.addIssue({ code: "custom", message: `${value} ${problem}` });
        }),
      }),
    )
    .max(100);

export const JitRole = z
  .object({
    role: z.enum(ROLES, { error: `role must be one of ${ROLES.join(", ")}` }),
    expires_at: z.number().int().positive().optional(),
    allowed_networks: z
      .object({ allowed_cidrs: cidrItems(4).optional(), allowed_cidrs_v6: cidrItems(6).optional() })
      .optional(),
    branches_only: z.boolean().optional(),
  })
  .strict();
export type JitRole = z.infer<typeof JitRole>;

export const JitRoleOut = z.object({
  role: z.string(),
  expires_at: z.number().int().optional(),
  allowed_networks: z.object({
    allowed_cidrs: z.array(z.object({ cidr: z.string() })),
    allowed_cidrs_v6: z.array(z.object({ cidr: z.string() })),
  }),
  branches_only: z.boolean(),
});

export const UserRoles = z.object({ user_id: z.string(), user_roles: z.array(JitRoleOut) });

export const JitAccess = z.object({
  state: z.enum(["enabled", "disabled"]),
  appliedSuccessfully: z.boolean(),
});

export const JitList = z.object({
  items: z.array(
    z.object({
      user_id: z.string(),
      primary_email: z.string(),
      invite_id: z.string().nullable(),
      expires_at: z.number().int().nullable(),
      user_roles: z.array(JitRoleOut),
    }),
  ),
});

/** A member's mapping to a role, as the control plane stores it (store.ts). */
export interface GrantRow {
  user_id: string;
  role: string;
  expires_at: Date | null;
  allowed_cidrs: string[];
  allowed_cidrs_v6: string[];
  branches_only: boolean;
}

export function roleOut(row: GrantRow) {
  return {
    role: row.role,
    ...(row.expires_at ? { expires_at: Math.floor(row.expires_at.getTime() / 1000) } : {}),
    allowed_networks: {
      allowed_cidrs: row.allowed_cidrs.map((cidr) => ({ cidr })),
      allowed_cidrs_v6: row.allowed_cidrs_v6.map((cidr) => ({ cidr })),
    },
    branches_only: row.branches_only,
  };
}

/** A role as given (an invitation keeps it so) in the answered shape. */
export const givenRoleOut = (r: JitRole) => ({
  role: r.role,
  ...(r.expires_at !== undefined ? { expires_at: r.expires_at } : {}),
  allowed_networks: {
    allowed_cidrs: r.allowed_networks?.allowed_cidrs ?? [],
    allowed_cidrs_v6: r.allowed_networks?.allowed_cidrs_v6 ?? [],
  },
  branches_only: r.branches_only ?? false,
});

export const rolesIn = (roles: JitRole[]) => {
  const names = roles.map((r) => r.role);
  if (new Set(names).size !== names.length) throw new HttpError(400, "Each role may be listed once");
  return roles;
};
