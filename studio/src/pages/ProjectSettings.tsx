import { useOutletContext } from "react-router";
import { PageHeader, Spinner } from "../components/Feedback";
import { ProjectActions } from "../components/ProjectActions";
import type { Project } from "../types";

/** The project's general settings: its identity, and pause, restore or delete. */
export default function ProjectSettings() {
  const { project, reload } = useOutletContext<{ project?: Project; reload: () => void }>();
  if (!project) return <Spinner />;
  return (
    <div className="page">
      <PageHeader title="Project settings" />
      <section className="card section keys">
        <div className="key-row">
          <div>Name</div>
          <div className="key-value">{project.name}</div>
        </div>
        <div className="key-row">
          <div>Reference</div>
          <div className="key-value">{project.ref}</div>
        </div>
        <div className="key-row">
          <div>Status</div>
          <div className="key-value">{project.status}</div>
        </div>
        <div className="key-row">
          <div>Created</div>
          <div className="key-value">{project.created_at}</div>
        </div>
      </section>
      <section className="section">
        <h2>Lifecycle</h2>
        <ProjectActions project={project} onChanged={reload} />
      </section>
    </div>
  );
}
