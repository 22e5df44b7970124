import { z } from "zod";
import { AuthApiError, emailOrPhoneOnly } from "./errors";
import type { Pkce } from "./otp";

/** What the auth endpoints read from request bodies: the shared field schemas and their 400s. */

export const email = z.string().trim().toLowerCase().email();
export const metadata = z.record(z.string(), z.unknown());
export const uuid = z.string().uuid();
/** The PKCE fields of a flow that ends with a code for the browser (auth-js flowType "pkce"). */
export const pkceFields = {
  code_challenge: z.string().nullish(),
  code_challenge_method: z.string().nullish(),
};

/**
 * The row a path's `id` names, or `notFound()`: an id that is not a UUID names no row (it is not looked up,
 * so a malformed id is the same 404 as an unknown one).
 */
export async function rowById<T>(
  id: unknown,
  find: (id: string) => Promise<T | null | undefined>,
  notFound: () => Error,
): Promise<T> {
  const text = String(id);
  const row = uuid.safeParse(text).success ? await find(text) : undefined;
  if (!row) throw notFound();
  return row;
}

/**
 * Whether a body takes the phone flow: it names a phone number, and then no email address (both are refused,
 * `ending` finishing the refusal as the platform's endpoint words it).
 */
export function takesPhoneFlow(
  body: { phone?: unknown; email?: unknown } | undefined,
  ending: string,
): boolean {
  if (!body?.phone) return false;
  if (body.email) throw emailOrPhoneOnly(ending);
  return true;
}

/** A body as `schema` reads it, or the auth server's 400 naming the first field at fault. */
export function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AuthApiError(400, "validation_failed", `${issue.path.join(".") || "body"}: ${issue.message}`);
  }
  return parsed.data;
}

/** The PKCE challenge of a request (s256 unless `plain`), or undefined for the implicit flow. */
export function pkceOf(body: {
  code_challenge?: string | null;
  code_challenge_method?: string | null;
}): Pkce | undefined {
  if (!body.code_challenge) return undefined;
  const method = (body.code_challenge_method ?? "s256").toLowerCase();
  if (method !== "s256" && method !== "plain") {
    throw new AuthApiError(400, "validation_failed", "code challenge method not supported");
  }
  if (body.code_challenge.length < 43 || body.code_challenge.length > 128) {
    throw new AuthApiError(
      400,
      "validation_failed",
      "code challenge has to be between 43 and 128 characters",
    );
  }
  return { codeChallenge: body.code_challenge, method };
}
