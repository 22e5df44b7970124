import { useState } from "react";
import { useNavigate } from "react-router";
import { mgmt } from "../api";
import type { Project } from "../types";
import { ErrorBox } from "./Feedback";
import { useAction } from "../useAction";

/** Pause or restore a project, or delete it after its name is typed to confirm. */
export function ProjectActions({ project, onChanged }: { project: Project; onChanged: () => void }) {
  const { busy, error, run } = useAction();
  const [confirming, setConfirming] = useState(false);
  const [typed, setTyped] = useState("");
  const navigate = useNavigate();

  async function act(work: () => Promise<unknown>, after: () => void = onChanged) {
    await run(async () => {
      await work();
      after();
    });
  }

  const paused = project.status === "INACTIVE";
  return (
    <div className="project-actions">
      <div className="page-actions">
        {project.status === "ACTIVE_HEALTHY" && (
          <button
            className="button"
            disabled={busy}
            onClick={() => void act(() => mgmt.post(`/v1/projects/${project.ref}/pause`))}
          >
            Pause
          </button>
        )}
        {paused && (
          <button
            className="button"
            disabled={busy}
            onClick={() => void act(() => mgmt.post(`/v1/projects/${project.ref}/restore`))}
          >
            Restore
          </button>
        )}
        <button className="button danger" disabled={busy} onClick={() => setConfirming((c) => !c)}>
          Delete project
        </button>
      </div>
      {confirming && (
        <form
          className="card form-row"
          aria-label="Delete project"
          onSubmit={(e) => {
            e.preventDefault();
            void act(
              () => mgmt.delete(`/v1/projects/${project.ref}`),
              () => navigate("/projects"),
            );
          }}
        >
          <label className="field">
            <span>
              Type <strong>{project.name}</strong> to delete the project and its database for good
            </span>
            <input
              aria-label="Project name to confirm"
              value={typed}
              onChange={(e) => setTyped(e.target.value)}
            />
          </label>
          <button className="button danger" type="submit" disabled={busy || typed !== project.name}>
            Delete for good
          </button>
        </form>
      )}
      <ErrorBox error={error} />
    </div>
  );
}
