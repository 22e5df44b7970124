import { createHmac } from "node:crypto";
import { claimedIssuer, ID_TOKEN_MAPPINGS, IdTokenError, type ProviderUser } from "./idTokens";
import {
  type Exchange,
  type ProviderSpec,
  appleIssuer,
  azureIssuerAllowed,
  discovered,
  fullName,
  githubApi,
  googleIssuer,
  host,
  idTokenUser,
  primary,
  str,
} from "./providerSpec";

/** Slack's OpenID user info (legacy and OIDC Slack alike); `verified` says whether its address is. */
async function slackUser(
  x: Exchange,
  verified: (u: Record<string, unknown>) => boolean,
): Promise<ProviderUser> {
  const api = `${host(x.p, "slack.com")}/api`;
  const u = await x.get(`${api}/openid.connect.userInfo`);
  const id = u["https://slack.com/user_id"];
  return {
    emails: primary(u.email, verified(u)),
    claims: {
      iss: api,
      sub: id,
      name: u.name,
      picture: u.picture,
      custom_claims: { "https://slack.com/team_id": u["https://slack.com/team_id"] },
      avatar_url: u.picture,
      full_name: u.name,
      provider_id: id,
    },
  };
}

/**
 * The OAuth providers Strata signs in with, one entry each as the platform's auth server has them
 * (internal/api/provider/<name>.go): endpoints, default scopes, and how the provider's answer becomes the
 * user's addresses and identity claims.
 */
export const PROVIDERS: Record<string, ProviderSpec> = {
  apple: {
    scopes: ["email", "name"],
    fixedScopes: true,
    authorizeParams: { response_mode: "form_post" },
    credentialsInBody: true,
    endpoints: (p) => discovered(appleIssuer(p)),
    async user(x) {
      if (!x.tokens.id_token) return { emails: [], claims: {} };
      const data = await idTokenUser(x, appleIssuer(x.p), ID_TOKEN_MAPPINGS.apple, { anyIssuer: true });
      // Apple names the user only in the first callback's form, as `user`.
      try {
        const u = JSON.parse(str(x.callback.user) || "null") as { name?: Record<string, unknown> } | null;
        const name = fullName(u?.name?.firstName, u?.name?.lastName);
        if (name) Object.assign(data.claims, { name, full_name: name });
      } catch {
        // no name given
      }
      return data;
    },
    idToken: { issuer: appleIssuer, mapping: ID_TOKEN_MAPPINGS.apple },
  },
  azure: {
    urlSlot: "optional",
    scopes: ["openid"],
    endpoints: (p) => {
      const base = host(p, "login.microsoftonline.com/common");
      return { authorize: `${base}/oauth2/v2.0/authorize`, token: `${base}/oauth2/v2.0/token` };
    },
    async user(x) {
      if (!x.tokens.id_token) throw new IdTokenError("azure: no OIDC ID token present in response");
      const issuer = claimedIssuer(x.tokens.id_token);
      if (!azureIssuerAllowed(x.p, issuer)) throw new IdTokenError(`azure: ID token issuer not valid`);
      return idTokenUser(x, issuer, ID_TOKEN_MAPPINGS.azure);
    },
  },
  bitbucket: {
    scopes: ["account", "email"],
    fixedScopes: true,
    endpoints: (p) => ({
      authorize: `${host(p, "bitbucket.org")}/site/oauth2/authorize`,
      token: `${host(p, "bitbucket.org")}/site/oauth2/access_token`,
    }),
    async user(x) {
      const api = `${host(x.p, "api.bitbucket.org")}/2.0`;
      const u = await x.get(`${api}/user`);
      const emails = (await x.get(`${api}/user/emails`))?.values ?? [];
      return {
        emails: emails
          .filter((e: { email?: string }) => e.email)
          .map((e: { email: string; is_confirmed?: boolean; is_primary?: boolean }) => ({
            email: e.email,
            verified: e.is_confirmed === true,
            primary: e.is_primary === true,
          })),
        claims: {
          iss: api,
          sub: u.uuid,
          name: u.display_name,
          picture: u.avatar?.href,
          avatar_url: u.avatar?.href,
          full_name: u.display_name,
          provider_id: u.uuid,
        },
      };
    },
  },
  discord: {
    scopes: ["email", "identify"],
    endpoints: (p) => ({
      authorize: `${host(p, "discord.com")}/api/oauth2/authorize`,
      token: `${host(p, "discord.com")}/api/oauth2/token`,
    }),
    async user(x) {
      const api = `${host(x.p, "discord.com")}/api`;
      const u = await x.get(`${api}/users/@me`);
      const avatar = u.avatar
        ? `https://cdn.discordapp.com/avatars/${u.id}/${u.avatar}.${String(u.avatar).startsWith("a_") ? "gif" : "png"}`
        : `https://cdn.discordapp.com/embed/avatars/${Number(u.discriminator) % 5 || 0}.png`;
      return {
        emails: primary(u.email, u.verified === true),
        claims: {
          iss: api,
          sub: u.id,
          name: `${str(u.username)}#${str(u.discriminator)}`,
          picture: avatar,
          custom_claims: { global_name: u.global_name },
          avatar_url: avatar,
          full_name: u.username,
          provider_id: u.id,
        },
      };
    },
  },
  facebook: {
    scopes: ["email"],
    endpoints: (p) => ({
      authorize: `${host(p, "www.facebook.com")}/dialog/oauth`,
      token: `${host(p, "graph.facebook.com")}/oauth/access_token`,
    }),
    async user(x) {
      const profile = `${host(x.p, "graph.facebook.com")}/me?fields=email,first_name,last_name,name,picture`;
      const proof = createHmac("sha256", x.p.secret).update(x.tokens.access_token).digest("hex");
      const u = await x.get(`${profile}&appsecret_proof=${proof}`);
      const picture = u.picture?.data?.url;
      return {
        emails: primary(u.email, true),
        claims: {
          iss: profile,
          sub: u.id,
          name: fullName(u.first_name, u.last_name),
          nickname: u.name,
          picture,
          slug: u.name,
          avatar_url: picture,
          full_name: fullName(u.first_name, u.last_name),
          provider_id: u.id,
        },
      };
    },
    idToken: { issuer: (p) => p.base ?? "https://www.facebook.com", mapping: ID_TOKEN_MAPPINGS.facebook },
  },
  figma: {
    scopes: ["current_user:read"],
    endpoints: (p) => ({
      authorize: `${host(p, "www.figma.com")}/oauth`,
      token: `${host(p, "api.figma.com")}/v1/oauth/token`,
    }),
    async user(x) {
      const api = host(x.p, "api.figma.com");
      const u = await x.get(`${api}/v1/me`);
      return {
        emails: primary(u.email, true),
        claims: {
          iss: api,
          sub: u.id,
          name: u.handle,
          email: u.email,
          email_verified: true,
          avatar_url: u.img_url,
          full_name: u.handle,
          provider_id: u.id,
        },
      };
    },
  },
  github: {
    scopes: ["user:email"],
    endpoints: (p) => ({
      authorize: `${host(p, "github.com")}/login/oauth/authorize`,
      token: `${host(p, "github.com")}/login/oauth/access_token`,
    }),
    async user(x) {
      const api = githubApi(x.p);
      const u = await x.get(`${api}/user`);
      const emails = (await x.get(`${api}/user/emails`)) ?? [];
      const id = String(u.id);
      return {
        emails: emails
          .filter((e: { email?: string }) => e.email)
          .map((e: { email: string; verified?: boolean; primary?: boolean }) => ({
            email: e.email,
            verified: e.verified === true,
            primary: e.primary === true,
          })),
        claims: {
          iss: api,
          sub: id,
          name: u.name,
          preferred_username: u.login,
          avatar_url: u.avatar_url,
          full_name: u.name,
          provider_id: id,
          user_name: u.login,
        },
      };
    },
  },
  gitlab: {
    urlSlot: "optional",
    scopes: ["read_user"],
    endpoints: (p) => ({
      authorize: `${host(p, "gitlab.com")}/oauth/authorize`,
      token: `${host(p, "gitlab.com")}/oauth/token`,
    }),
    async user(x) {
      const base = host(x.p, "gitlab.com");
      const u = await x.get(`${base}/api/v4/user`);
      const others = (await x.get(`${base}/api/v4/user/emails`)) ?? [];
      const id = String(u.id);
      return {
        emails: [
          ...others
            .filter((e: { email?: string }) => e.email)
            .map((e: { email: string }) => ({ email: e.email, verified: false, primary: false })),
          ...primary(u.email, Boolean(u.confirmed_at)),
        ],
        claims: {
          iss: base,
          sub: id,
          name: u.name,
          picture: u.avatar_url,
          avatar_url: u.avatar_url,
          full_name: u.name,
          provider_id: id,
        },
      };
    },
  },
  google: {
    scopes: ["email", "profile"],
    endpoints: (p) => discovered(googleIssuer(p)),
    async user(x) {
      if (x.tokens.id_token) return idTokenUser(x, googleIssuer(x.p), ID_TOKEN_MAPPINGS.google);
      const userinfo = `${host(x.p, "www.googleapis.com")}/userinfo/v2/me`;
      const u = await x.get(userinfo);
      const verified = u.verified_email === true || u.email_verified === true;
      return {
        emails: primary(u.email, verified),
        claims: {
          iss: userinfo,
          sub: u.id,
          name: u.name,
          picture: u.picture,
          email: u.email,
          email_verified: verified,
          avatar_url: u.picture,
          full_name: u.name,
          provider_id: u.id,
        },
      };
    },
    idToken: { issuer: googleIssuer, mapping: ID_TOKEN_MAPPINGS.google },
  },
  kakao: {
    scopes: ["account_email", "profile_image", "profile_nickname"],
    credentialsInBody: true,
    endpoints: (p) => ({
      authorize: `${host(p, "kauth.kakao.com")}/oauth/authorize`,
      token: `${host(p, "kauth.kakao.com")}/oauth/token`,
    }),
    async user(x) {
      const api = host(x.p, "kapi.kakao.com");
      const u = await x.get(`${api}/v2/user/me`);
      const account = u.kakao_account ?? {};
      const name = account.profile?.nickname;
      const id = String(u.id);
      return {
        emails: primary(account.email, account.is_email_verified === true && account.is_email_valid === true),
        claims: {
          iss: api,
          sub: id,
          name,
          preferred_username: name,
          avatar_url: account.profile?.profile_image_url,
          full_name: name,
          provider_id: id,
          user_name: name,
        },
      };
    },
    idToken: { issuer: (p) => p.base ?? "https://kauth.kakao.com", mapping: ID_TOKEN_MAPPINGS.kakao },
  },
  keycloak: {
    urlSlot: "required",
    // openid as well: a standard OIDC server answers userinfo only for it.
    scopes: ["openid", "profile", "email"],
    endpoints: (p) => ({
      authorize: `${p.base}/protocol/openid-connect/auth`,
      token: `${p.base}/protocol/openid-connect/token`,
    }),
    async user(x) {
      const u = await x.get(`${x.p.base}/protocol/openid-connect/userinfo`);
      const custom = Object.fromEntries(
        Object.entries(u).filter(([k]) => !["name", "sub", "email", "email_verified"].includes(k)),
      );
      return {
        emails: primary(u.email, u.email_verified === true),
        claims: {
          iss: x.p.base,
          sub: u.sub,
          name: u.name,
          email: u.email,
          email_verified: u.email_verified === true,
          custom_claims: custom,
          full_name: u.name,
          provider_id: u.sub,
        },
      };
    },
    idToken: { issuer: (p) => p.base!, mapping: ID_TOKEN_MAPPINGS.generic },
  },
  linkedin_oidc: {
    scopes: ["openid", "email", "profile"],
    endpoints: (p) => ({
      authorize: `${host(p, "api.linkedin.com")}/oauth/v2/authorization`,
      token: `${host(p, "api.linkedin.com")}/oauth/v2/accessToken`,
    }),
    async user(x) {
      if (!x.tokens.id_token) return { emails: [], claims: {} };
      const issuer = x.p.base ?? "https://www.linkedin.com/oauth";
      return idTokenUser(x, issuer, ID_TOKEN_MAPPINGS.linkedin_oidc);
    },
  },
  notion: {
    scopes: [],
    fixedScopes: true,
    endpoints: (p) => ({
      authorize: `${host(p, "api.notion.com")}/v1/oauth/authorize`,
      token: `${host(p, "api.notion.com")}/v1/oauth/token`,
    }),
    async user(x) {
      const api = host(x.p, "api.notion.com");
      const owner =
        (await x.get(`${api}/v1/users/me`, { "Notion-Version": "2021-08-16" }))?.bot?.owner?.user ?? {};
      return {
        emails: primary(owner.person?.email, true),
        claims: {
          iss: api,
          sub: owner.id,
          name: owner.name,
          picture: owner.avatar_url,
          avatar_url: owner.avatar_url,
          full_name: owner.name,
          provider_id: owner.id,
        },
      };
    },
  },
  slack: {
    // Legacy Slack OAuth: Slack's v1 authorize and oauth.access, its OpenID user info.
    scopes: ["profile", "email", "openid"],
    endpoints: (p) => ({
      authorize: `${host(p, "slack.com")}/oauth/authorize`,
      token: `${host(p, "slack.com")}/api/oauth.access`,
    }),
    // Slack does not say whether the address is verified: the platform takes it as verified.
    user: (x) => slackUser(x, () => true),
  },
  slack_oidc: {
    scopes: ["profile", "email", "openid"],
    endpoints: (p) => ({
      authorize: `${host(p, "slack.com")}/openid/connect/authorize`,
      token: `${host(p, "slack.com")}/api/openid.connect.token`,
    }),
    user: (x) => slackUser(x, (u) => u.email_verified === true),
  },
  spotify: {
    scopes: ["user-read-email"],
    endpoints: (p) => ({
      authorize: `${host(p, "accounts.spotify.com")}/authorize`,
      token: `${host(p, "accounts.spotify.com")}/api/token`,
    }),
    async user(x) {
      const api = host(x.p, "api.spotify.com/v1");
      const u = await x.get(`${api}/me`);
      const images: { url: string; height?: number; width?: number }[] = u.images ?? [];
      const area = (i: { height?: number; width?: number }) => (i.height ?? 0) * (i.width ?? 0);
      const avatar = images.reduce<(typeof images)[number] | undefined>(
        (best, i) => (!best || area(i) > area(best) ? i : best),
        undefined,
      )?.url;
      return {
        emails: primary(u.email, false),
        claims: {
          iss: api,
          sub: u.id,
          name: u.display_name,
          picture: avatar,
          avatar_url: avatar,
          full_name: u.display_name,
          provider_id: u.id,
        },
      };
    },
  },
  twitch: {
    scopes: ["user:read:email"],
    endpoints: (p) => ({
      authorize: `${host(p, "id.twitch.tv")}/oauth2/authorize`,
      token: `${host(p, "id.twitch.tv")}/oauth2/token`,
    }),
    async user(x) {
      const api = host(x.p, "api.twitch.tv");
      const u = (await x.get(`${api}/helix/users`, { "Client-Id": x.p.clientId }))?.data?.[0];
      if (!u) throw new Error("twitch: no user");
      return {
        emails: primary(u.email, true),
        claims: {
          iss: api,
          sub: u.id,
          picture: u.profile_image_url,
          name: u.login,
          nickname: u.display_name,
          custom_claims: {
            broadcaster_type: u.broadcaster_type,
            description: u.description,
            type: u.type,
            offline_image_url: u.offline_image_url,
            view_count: u.view_count,
          },
          slug: u.display_name,
          avatar_url: u.profile_image_url,
          full_name: u.login,
          provider_id: u.id,
        },
      };
    },
  },
  twitter: {
    scopes: [],
    fixedScopes: true,
    oauth1: { requestToken: (p) => `${host(p, "api.twitter.com")}/oauth/request_token` },
    endpoints: (p) => ({
      authorize: `${host(p, "api.twitter.com")}/oauth/authenticate`,
      token: `${host(p, "api.twitter.com")}/oauth/access_token`,
    }),
    async user(x) {
      const profile = `${host(x.p, "api.twitter.com")}/1.1/account/verify_credentials.json`;
      const u = await x.get(`${profile}?include_entities=false&skip_status=true&include_email=true`);
      return {
        emails: primary(u.email, true),
        claims: {
          iss: profile,
          sub: u.id_str,
          name: u.name,
          picture: u.profile_image_url_https,
          preferred_username: u.screen_name,
          user_name: u.screen_name,
          full_name: u.name,
          avatar_url: u.profile_image_url_https,
          provider_id: u.id_str,
        },
      };
    },
  },
  x: {
    scopes: ["users.email", "tweet.read", "users.read", "offline.access"],
    requiresPkce: true,
    endpoints: (p) => ({
      authorize: `${host(p, "x.com")}/i/oauth2/authorize`,
      token: `${host(p, "api.x.com")}/2/oauth2/token`,
    }),
    async user(x) {
      const api = host(x.p, "api.x.com");
      const fields = "id,name,username,confirmed_email,profile_image_url,url,created_at";
      const u = (await x.get(`${api}/2/users/me?user.fields=${fields}`))?.data ?? {};
      return {
        emails: primary(u.confirmed_email, true),
        claims: {
          iss: api,
          sub: u.id,
          name: u.name,
          preferred_username: u.username,
          picture: u.profile_image_url,
          profile: u.username ? `https://x.com/${u.username}` : undefined,
          website: u.url,
          custom_claims: u.created_at ? { created_at: u.created_at } : undefined,
          avatar_url: u.profile_image_url,
          full_name: u.name,
          provider_id: u.id,
          user_name: u.username,
        },
      };
    },
  },
  workos: {
    urlSlot: "optional",
    scopes: [],
    fixedScopes: true,
    endpoints: (p) => ({
      authorize: `${host(p, "api.workos.com")}/sso/authorize`,
      token: `${host(p, "api.workos.com")}/sso/token`,
    }),
    async user(x) {
      const u = (x.tokens.profile ?? {}) as Record<string, unknown>;
      const name = fullName(u.first_name, u.last_name);
      return {
        emails: primary(u.email, true),
        claims: {
          iss: host(x.p, "api.workos.com"),
          sub: u.id,
          name,
          custom_claims: { connection_id: u.connection_id, organization_id: u.organization_id },
          full_name: name,
          provider_id: u.id,
        },
      };
    },
  },
  zoom: {
    scopes: [],
    fixedScopes: true,
    endpoints: (p) => ({
      authorize: `${host(p, "zoom.us")}/oauth/authorize`,
      token: `${host(p, "zoom.us")}/oauth/token`,
    }),
    async user(x) {
      const api = `${host(x.p, "api.zoom.us")}/v2`;
      const u = await x.get(`${api}/users/me`);
      const name = fullName(u.first_name, u.last_name);
      return {
        emails: primary(u.email, u.login_type !== "100" || Number(u.verified) !== 0),
        claims: {
          iss: api,
          sub: u.id,
          name,
          picture: u.pic_url,
          avatar_url: u.pic_url,
          full_name: name,
          provider_id: u.id,
        },
      };
    },
  },
};
