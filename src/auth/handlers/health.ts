import { STRATA_VERSION } from "../../version";
import type { AuthCall } from "../call";

/**
 * GET /health, as the platform's auth server answers it (the CLI's `link` and `services` read `version`). The
 * request context has loaded the project and its auth settings by then, so an answer means the service serves.
 */
export async function health(_call: AuthCall) {
  return {
    version: `v${STRATA_VERSION}`,
    name: "Strata Auth",
    description: "Strata's auth service, answering the platform's auth API (GoTrue)",
  };
}
