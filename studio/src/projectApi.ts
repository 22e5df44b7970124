import { mgmt, request } from "./api";
import { useSession } from "./session";
import type { ApiKey } from "./types";
import { useAsync } from "./useAsync";

/**
 * A project's data APIs (REST, auth admin, storage) at the project's own host, `<ref>.<domain>` on this
 * server's port, with the project's secret key read through `GET /v1/projects/{ref}/api-keys?reveal=true`.
 */
export interface ProjectApi {
  url: string;
  /** The secret key the calls carry (realtime's client takes it too). */
  key: string;
  call<T>(
    path: string,
    init?: { method?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ data: T; response: Response }>;
}

/** The key that acts as the service role: an opaque secret key, else the legacy service_role JWT. */
export function serviceKeyOf(keys: ApiKey[]): string | undefined {
  return (
    keys.find((k) => k.type === "secret") ??
    keys.find((k) => k.type === "legacy" && k.name === "service_role")
  )?.api_key;
}

export function projectUrl(ref: string, domain: string): string {
  const port = window.location.port ? `:${window.location.port}` : "";
  return `${window.location.protocol}//${ref}.${domain}${port}`;
}

const apis = new Map<string, Promise<ProjectApi>>();

/** The data APIs of project `ref` (the key is read once per page load). */
export function projectApi(ref: string, domain: string): Promise<ProjectApi> {
  let api = apis.get(ref);
  if (!api) {
    api = mgmt.get<ApiKey[]>(`/v1/projects/${ref}/api-keys?reveal=true`).then((keys) => {
      const key = serviceKeyOf(keys);
      if (!key)
        throw new Error("This project has no secret or service_role key: create one in Settings › API");
      const url = projectUrl(ref, domain);
      return {
        url,
        key,
        call: (path, init = {}) =>
          request(url + path, { ...init, headers: { apikey: key, ...init.headers } }),
      };
    });
    api.catch(() => apis.delete(ref));
    apis.set(ref, api);
  }
  return api;
}

/** Forgets every key (sign-out). */
export function forgetProjectApis() {
  apis.clear();
}

/** The data APIs of the project of the page, for the signed-in session. */
export function useProjectApi(ref: string) {
  const { session } = useSession();
  return useAsync(() => projectApi(ref, session.project_domain), [ref, session.project_domain]);
}
