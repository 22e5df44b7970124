import { useParams } from "react-router";
import { mgmt } from "../api";
import { DataGrid } from "../components/DataGrid";
import { ErrorBox, PageHeader, Spinner } from "../components/Feedback";
import type { Organization as Org, Project } from "../types";
import { useAsync } from "../useAsync";
import { ProjectCards } from "./Projects";

interface Member {
  user_id: string;
  user_name: string;
  email?: string;
  role_name: string;
  mfa_enabled: boolean;
}

export default function Organization() {
  const { slug } = useParams() as { slug: string };
  const org = useAsync(() => mgmt.get<Org>(`/v1/organizations/${slug}`), [slug]);
  const projects = useAsync(() => mgmt.get<Project[]>("/v1/projects"), []);
  const members = useAsync(() => mgmt.get<Member[]>(`/v1/organizations/${slug}/members`), [slug]);
  const own = projects.data?.filter(
    (p) => p.organization_slug === slug || p.organization_id === org.data?.id,
  );
  return (
    <div className="page">
      <PageHeader title={org.data?.name ?? slug} />
      <ErrorBox error={org.error ?? projects.error} />
      <h2>Projects</h2>
      {own ? <ProjectCards projects={own} /> : <Spinner />}
      <section className="section">
        <h2>Members</h2>
        <ErrorBox error={members.error} />
        {members.data && (
          <DataGrid
            rows={members.data as unknown as Record<string, unknown>[]}
            columns={["user_name", "email", "role_name", "mfa_enabled"]}
            height={240}
          />
        )}
      </section>
    </div>
  );
}
