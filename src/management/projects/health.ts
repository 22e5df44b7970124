import http from "node:http";
import type { z } from "zod";
import { mintLegacyKey } from "../../auth/legacyKeys";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import type { HealthService, healthItem } from "./shapes";

type HealthItem = z.infer<typeof healthItem>;

/** Services Strata does not run; reported unhealthy rather than pretended. */
const NOT_SERVED: Partial<Record<HealthService, string>> = {
  pooler: "Strata runs no connection pooler",
  pg_bouncer: "Strata runs no connection pooler",
};

/** One request to this server's own data API for the project, at its host, with its anon key. */
function probeDataApi(
  ctx: AppContext,
  project: ProjectRuntime,
  method: string,
  path: string,
  body?: string,
): Promise<number> {
  return mintLegacyKey(project.record.jwtSecret, "anon", project.record.legacyKeysIat).then(
    (anonKey) =>
      new Promise((resolve, reject) => {
        const req = http.request(
          {
            host: "127.0.0.1",
            port: ctx.config.port,
            method,
            path,
            headers: {
              host: `${project.ref}.${ctx.config.domain}`,
              apikey: anonKey,
              authorization: `Bearer ${anonKey}`,
              ...(body ? { "content-type": "application/json" } : {}),
            },
          },
          (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode ?? 0));
          },
        );
        req.on("error", reject);
        req.end(body);
      }),
  );
}

async function check(ctx: AppContext, project: ProjectRuntime, service: HealthService): Promise<void> {
  const notServed = NOT_SERVED[service];
  if (notServed) throw new Error(notServed);
  const expectOk = (status: number) => {
    if (status < 200 || status >= 300) throw new Error(`answered HTTP ${status}`);
  };
  switch (service) {
    case "db":
      await project.dataPool.query("select 1");
      return;
    case "db_postgres_user":
      await project.adminPool.query("select 1");
      return;
    case "rest":
      return expectOk(await probeDataApi(ctx, project, "GET", "/rest/v1/"));
    case "graphql":
      return expectOk(
        await probeDataApi(ctx, project, "POST", "/graphql/v1", JSON.stringify({ query: "{ __typename }" })),
      );
    case "auth":
      return expectOk(await probeDataApi(ctx, project, "GET", "/auth/v1/health"));
    case "storage":
      return expectOk(await probeDataApi(ctx, project, "GET", "/storage/v1/version"));
    case "realtime":
      return expectOk(
        await probeDataApi(
          ctx,
          project,
          "POST",
          "/realtime/v1/api/broadcast",
          JSON.stringify({ messages: [] }),
        ),
      );
  }
}

/** Checks each requested service for real, each within `timeoutMs`. */
export async function projectHealth(
  ctx: AppContext,
  project: ProjectRuntime,
  services: HealthService[],
  timeoutMs: number,
): Promise<HealthItem[]> {
  const status = project.record.status;
  return Promise.all(
    [...new Set(services)].map(async (name): Promise<HealthItem> => {
      if (status !== "ACTIVE_HEALTHY") {
        return {
          name,
          healthy: false,
          status: status === "COMING_UP" ? "COMING_UP" : "UNHEALTHY",
          error: `project is ${status}`,
        };
      }
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        await Promise.race([check(ctx, project, name), timeout]);
        return { name, healthy: true, status: "ACTIVE_HEALTHY" };
      } catch (e) {
        return { name, healthy: false, status: "UNHEALTHY", error: (e as Error).message };
      } finally {
        clearTimeout(timer);
      }
    }),
  );
}
