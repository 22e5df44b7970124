import { z } from "zod";

/** Long enough for any password bcrypt takes (72 bytes) in any encoding; longer ones never match. */
const password = z.string().min(1).max(1024);

export const signInBody = z.object({ email: z.string().min(1).max(320), password }).strict();

const userSummary = z.object({ id: z.string(), email: z.string(), username: z.string() });

export const sessionResponse = z.object({
  access_token: z.string(),
  token_type: z.literal("Bearer"),
  expires_in: z.number().int(),
  expires_at: z.string(),
  user: userSummary,
});

export const acceptInvitationBody = z
  .object({
    token: z.string().min(1).max(256),
    /** A new user's password; an existing user's proves who they are when they are not signed in. */
    password: password.optional(),
    /** A new user's name (default: the email's part before `@`). */
    username: z.string().trim().min(1).max(64).optional(),
  })
  .strict();

export const acceptedInvitation = z.object({
  organization: z.object({ id: z.string(), slug: z.string(), name: z.string() }),
  role_name: z.string(),
  user: userSummary,
});
