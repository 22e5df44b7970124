import type { AuthSettings } from "./authConfig";

/** A uri_allow_list glob as the platform reads it: `**` any text, `*` and `?` none of `.` and `/`. */
function globRegExp(pattern: string): RegExp {
  let source = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "*" && pattern[i + 1] === "*") {
      source += ".*";
      i++;
    } else if (c === "*") source += "[^./]*";
    else if (c === "?") source += "[^./]";
    else source += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`);
}

/** Whether a redirect target is allowed: on site_url's host, or matching an entry of uri_allow_list. */
export function isRedirectAllowed(settings: AuthSettings, target: string): boolean {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return false;
  }
  try {
    const site = new URL(String(settings.site_url));
    if (
      (url.protocol === "http:" || url.protocol === "https:") &&
      url.protocol === site.protocol &&
      url.host === site.host
    )
      return true;
  } catch {
    // no usable site_url: only the allow list decides
  }
  return String(settings.uri_allow_list ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)
    .some((p) => p === target || globRegExp(p).test(target));
}

/** The redirect target of a flow: the requested one when allowed, else site_url. */
export function redirectTarget(settings: AuthSettings, requested: unknown): string {
  if (typeof requested === "string" && requested && isRedirectAllowed(settings, requested)) return requested;
  return String(settings.site_url);
}

/** `target` with `params` added to its query (PKCE codes) or fragment (tokens, errors, messages). */
export function withParams(target: string, params: Record<string, string>, where: "query" | "fragment") {
  const encoded = new URLSearchParams(params).toString();
  const hashAt = target.indexOf("#");
  const base = hashAt >= 0 ? target.slice(0, hashAt) : target;
  if (where === "fragment") return `${base}#${encoded}`;
  const fragment = hashAt >= 0 ? target.slice(hashAt) : "";
  return `${base}${base.includes("?") ? "&" : "?"}${encoded}${fragment}`;
}
