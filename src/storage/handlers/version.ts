import { STRATA_VERSION } from "../../version";
import type { ProjectInput } from "../http/route";

/**
 * `GET /version`: the service's version as plain text without a `v` (the CLI adds one), as the platform's storage server answers it (the CLI's
 * `link` and `services` read it). Answered once the project's storage context has opened.
 */
export async function version({ res }: ProjectInput) {
  res.type("text/plain").send(STRATA_VERSION);
}
