/**
 * password_hibp_enabled, offline: the platform asks the HaveIBeenPwned range API, which needs the public
 * internet. Strata checks instead against the list of the most common passwords of public breach corpora
 * that zxcvbn-ts ships (about 49,000, lower case): a much smaller list than HIBP's, but the same refusal
 * (`weak_password`, reason `pwned`) for the passwords attackers try first, and nothing leaves the machine.
 */
let leaked: Set<string> | undefined;

export function isLeakedPassword(password: string): boolean {
  // The list (and the library holding it) is loaded with the first check.
  leaked ??= new Set(
    (require("@zxcvbn-ts/language-common") as typeof import("@zxcvbn-ts/language-common")).dictionary[
      "passwords-common"
    ] as string[],
  );
  return leaked.has(password.toLowerCase());
}
