import { useEffect } from "react";
import type { Project } from "./types";

/** Settled states: a project in any other (coming up, pausing, restoring) is polled each second until it settles. */
const SETTLED = new Set(["ACTIVE_HEALTHY", "INACTIVE", "REMOVED"]);

export function usePollWhileBusy(projects: Project[] | undefined, reload: () => void) {
  const busy = projects?.some((p) => !SETTLED.has(p.status));
  useEffect(() => {
    if (!busy) return;
    const timer = setTimeout(reload, 1000);
    return () => clearTimeout(timer);
  }, [busy, projects, reload]);
}
