/** Who is calling the Management API. */
export interface Principal {
  userId: string;
  /** The access token's id, or the session's (`via`). */
  tokenId: string;
  /** An access token (personal, fine-grained or OAuth), or a sign-in session (src/management/account). */
  via: "token" | "session";
  /** null: a personal access token or a session, with all of the user's privileges. */
  permissions: string[] | null;
  /** OAuth scopes, for OAuth access tokens; null for personal and fine-grained tokens. */
  scopes: string[] | null;
  /** OAuth application, when the token was issued to one (rate-limit identity). */
  oauthAppId: string | null;
  /** An OAuth token acts in the one organization its user chose when authorising the application. */
  organizationId: string | null;
  /**
   * The caller may act on what every project of a cluster shares (see `Access.installationAdmin`): a user the
   * operator made an installation administrator, through one of its own tokens. An OAuth token never is: an
   * application granted a scope acts on the user's projects, not as the installation's operator.
   */
  installationAdmin: boolean;
}

/** Whether the caller is the user themself (a personal access token or a session), not a token made for a tool. */
export function isUserThemself(principal: Principal): boolean {
  return principal.permissions === null && principal.scopes === null && principal.oauthAppId === null;
}
