import { NavLink, Outlet, useParams } from "react-router";
import { mgmt } from "../api";
import type { Project } from "../types";
import { useAsync } from "../useAsync";
import { ErrorBox } from "./Feedback";

const SECTIONS: [string, string][] = [
  ["editor", "Table editor"],
  ["sql/new", "SQL editor"],
  ["auth/users", "Authentication"],
  ["storage/buckets", "Storage"],
  ["functions", "Edge functions"],
  ["realtime/inspector", "Realtime"],
  ["logs/explorer", "Logs"],
  ["database/backups/scheduled", "Backups"],
  ["settings/api", "API settings"],
];

/** A project's pages: the sections on the left, the page on the right. */
export function ProjectShell() {
  const { ref } = useParams() as { ref: string };
  const project = useAsync(() => mgmt.get<Project>(`/v1/projects/${ref}`), [ref]);
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
            <NavLink key={path} to={`/project/${ref}/${path}`} className="sidebar-link">
              {label}
            </NavLink>
          ))}
        </nav>
      </aside>
      <main className="project-main">
        <ErrorBox error={project.error} title="Project" />
        <Outlet key={ref} />
      </main>
    </div>
  );
}
