/**
 * Names no vanity subdomain may take, nor anything that reads like them: hosts people take for the
 * installation's own (web, mail and name servers, the dashboard, support, billing), Strata's services, and
 * every project's ref host (`<ref>.<STRATA_DOMAIN>`, 20 lowercase letters), so a project can never pass
 * for the installation or for another project.
 */
const RESERVED = `
  www web api admin administrator root localhost internal intranet local host
  mail email webmail smtp imap pop pop3 mx postmaster hostmaster webmaster abuse autodiscover autoconfig
  ftp sftp ssh vpn ns ns1 ns2 ns3 ns4 dns cdn static assets media
  dashboard studio console app apps account accounts login signin signup sso oauth status support help docs
  billing security management platform strata supabase
  auth storage realtime functions graphql rest db database postgres pooler analytics logs metrics health
`
  .trim()
  .split(/\s+/);

/** Characters and pairs that read alike, folded to one form: `adm1n` and `ww-w` read as `admin` and `www`. */
// 0→o, 1→l, 2→z, 3→e, 4→a, 5→s, 6→b, 7→t, 8→b, 9→g
const DIGITS = "olzeasbtbg";

/** The name with dashes dropped and digits as the letters they resemble (the same length as its letters). */
const lettersOf = (name: string) => name.replace(/-/g, "").replace(/[0-9]/g, (d) => DIGITS[Number(d)]);

/** The name as it reads: besides lettersOf, `i`/`l` as one letter, `rn` as `m`, `vv` as `w`. */
const readingOf = (name: string) =>
  lettersOf(name).replace(/i/g, "l").replace(/rn/g, "m").replace(/vv/g, "w");

const RESERVED_READINGS = new Set(RESERVED.map(readingOf));

/** Why a vanity subdomain (already lower-case letters, digits and dashes) may not be used, or undefined. */
export function reservedNameProblem(name: string): string | undefined {
  if (/^[a-z]{20}$/.test(lettersOf(name))) return "reads like a project ref, which is reserved";
  if (RESERVED_READINGS.has(readingOf(name))) return "is reserved, or reads like a reserved name";
  return undefined;
}
