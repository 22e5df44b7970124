import { NavLink, Outlet, useParams } from "react-router";
import { mgmt } from "../api";
import type { Project } from "../types";
import { useAsync } from "../useAsync";
import { usePollWhileBusy } from "../usePollWhileBusy";
import { ErrorBox } from "./Feedback";

const SECTIONS: [string, string][] = [
  ["editor", "Table editor"],
  ["sql/new", "SQL editor"],
  ["auth/users", "Authentication"],
  ["auth/providers", "Auth settings"],
  ["storage/buckets", "Storage"],
  ["functions", "Edge functions"],
  ["realtime/inspector", "Realtime"],
  ["logs/explorer", "Logs"],
  ["database/extensions", "Extensions"],
  ["database/migrations", "Migrations"],
  ["database/roles", "Roles"],
  ["database/backups/scheduled", "Backups"],
  ["api", "API docs"],
  ["api/graphiql", "GraphiQL"],
  ["settings/api", "API settings"],
  ["settings/database", "Database settings"],
  ["settings/infrastructure", "Read replicas"],
  ["settings/jwt", "JWT keys"],
  ["settings/general", "Project settings"],
];

/** A project's pages: the sections on the left, the page on the right. */
export function ProjectShell() {
  const { ref } = useParams() as { ref: string };
  const project = useAsync(() => mgmt.get<Project>(`/v1/projects/${ref}`), [ref]);
  usePollWhileBusy(project.data && [project.data], project.reload);
  return (
    <div className="project">
      <aside className="sidebar">
        <div className="sidebar-project">
          <div className="sidebar-name">{project.data?.name ?? ref}</div>
          {project.data && (
            <span className={`status status-${project.data.status}`}>{project.data.status}</span>
          )}
        </div>
        <nav aria-label="Project sections">
          {SECTIONS.map(([path, label]) => (
            // "api" is also the start of "api/graphiql": it is current on its own path only.
            <NavLink key={path} to={`/project/${ref}/${path}`} end={path === "api"} className="sidebar-link">
              {label}
            </NavLink>
          ))}
        </nav>
      </aside>
      <main className="project-main">
        <ErrorBox error={project.error} title="Project" />
        {project.data && project.data.status !== "ACTIVE_HEALTHY" && (
          <div className="notice" role="note">
            This project is {project.data.status.replace(/_/g, " ").toLowerCase()}: its APIs answer once it is
            active again.
          </div>
        )}
        <Outlet key={ref} context={{ project: project.data, reload: project.reload }} />
      </main>
    </div>
  );
}
