import { useState, type FormEvent } from "react";
import { Link } from "react-router";
import { mgmt } from "../api";
import { Empty, ErrorBox, PageHeader, Spinner } from "../components/Feedback";
import type { Organization, Project } from "../types";
import { useAsync } from "../useAsync";
import { usePollWhileBusy } from "../usePollWhileBusy";
import { useAction } from "../useAction";

const ACTIVE = "ACTIVE_HEALTHY";

export function ProjectCards({ projects }: { projects: Project[] }) {
  if (!projects.length) return <Empty>No projects yet.</Empty>;
  return (
    <ul className="cards" aria-label="Projects">
      {projects.map((p) => (
        <li key={p.ref} className="card project-card" data-ref={p.ref}>
          <Link to={`/project/${p.ref}/editor`} className="project-card-link">
            <div className="project-card-name">{p.name}</div>
            <div className="muted small mono">{p.ref}</div>
          </Link>
          <div className="project-card-foot">
            <span className={`status status-${p.status}`}>
              {p.status === ACTIVE ? "Active" : p.status.replace(/_/g, " ").toLowerCase()}
            </span>
            {p.organization_slug && (
              <Link className="muted small" to={`/org/${p.organization_slug}`}>
                {p.organization_slug}
              </Link>
            )}
          </div>
          {p.status === "COMING_UP" && <progress aria-label={`Setting up ${p.name}`} />}
          {(p.status === "PAUSING" || p.status === "RESTORING") && (
            <progress aria-label={`${p.status} ${p.name}`} />
          )}
        </li>
      ))}
    </ul>
  );
}

function NewProject({ organizations, onCreated }: { organizations: Organization[]; onCreated: () => void }) {
  const [name, setName] = useState("");
  const [org, setOrg] = useState(organizations[0]?.slug ?? "");
  const [password, setPassword] = useState("");
  const { busy, error, run } = useAction();

  async function submit(e: FormEvent) {
    e.preventDefault();
    await run(async () => {
      await mgmt.post("/v1/projects", { name, organization_slug: org, db_pass: password });
      setName("");
      setPassword("");
      onCreated();
    });
  }

  return (
    <form className="card form-row" onSubmit={(e) => void submit(e)} aria-label="New project">
      <label className="field">
        <span>Name</span>
        <input name="name" value={name} onChange={(e) => setName(e.target.value)} required />
      </label>
      <label className="field">
        <span>Organization</span>
        <select name="organization" value={org} onChange={(e) => setOrg(e.target.value)}>
          {organizations.map((o) => (
            <option key={o.slug} value={o.slug}>
              {o.name}
            </option>
          ))}
        </select>
      </label>
      <label className="field">
        <span>Database password</span>
        <input
          name="db_pass"
          type="password"
          autoComplete="new-password"
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          required
        />
      </label>
      <button className="button primary" type="submit" disabled={busy}>
        {busy ? "Creating…" : "Create project"}
      </button>
      <ErrorBox error={error} />
    </form>
  );
}

export default function Projects() {
  const projects = useAsync(() => mgmt.get<Project[]>("/v1/projects"), []);
  const organizations = useAsync(() => mgmt.get<Organization[]>("/v1/organizations"), []);
  const [creating, setCreating] = useState(false);
  usePollWhileBusy(projects.data, projects.reload);

  return (
    <div className="page">
      <PageHeader title="Projects">
        <button className="button primary" onClick={() => setCreating((c) => !c)}>
          {creating ? "Close" : "New project"}
        </button>
      </PageHeader>
      {creating && organizations.data && (
        <NewProject
          organizations={organizations.data}
          onCreated={() => {
            setCreating(false);
            projects.reload();
          }}
        />
      )}
      <ErrorBox error={projects.error ?? organizations.error} />
      {projects.data ? (
        <ProjectCards projects={projects.data} />
      ) : (
        !projects.error && <Spinner label="Loading projects" />
      )}
      {organizations.data && organizations.data.length > 0 && (
        <section className="section">
          <h2>Organizations</h2>
          <ul className="chips">
            {organizations.data.map((o) => (
              <li key={o.slug}>
                <Link to={`/org/${o.slug}`} className="chip">
                  {o.name}
                </Link>
              </li>
            ))}
          </ul>
        </section>
      )}
    </div>
  );
}
