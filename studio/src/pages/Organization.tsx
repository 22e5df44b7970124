import { useState, type FormEvent } from "react";
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

const ROLES = ["Owner", "Administrator", "Developer", "Read-only"];

/** Invites a member by email; without a mail server the API answers the link, shown here once. */
function Invite({ slug, onDone }: { slug: string; onDone: () => void }) {
  const [email, setEmail] = useState("");
  const [role, setRole] = useState("Developer");
  const [link, setLink] = useState<string>();
  const [error, setError] = useState<Error>();
  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    setLink(undefined);
    try {
      const invited = await mgmt.post<{ invitation_link?: string }>(
        `/v1/organizations/${slug}/members/invitations`,
        {
          email,
          role_name: role,
        },
      );
      setLink(invited.invitation_link);
      setEmail("");
      onDone();
    } catch (err) {
      setError(err as Error);
    }
  }
  return (
    <form className="card form-row" aria-label="Invite a member" onSubmit={(e) => void submit(e)}>
      <label className="field">
        <span>Email</span>
        <input type="email" value={email} onChange={(e) => setEmail(e.target.value)} required />
      </label>
      <label className="field">
        <span>Role</span>
        <select value={role} onChange={(e) => setRole(e.target.value)}>
          {ROLES.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
      </label>
      <button className="button primary" type="submit">
        Invite
      </button>
      {link && (
        <div className="notice" style={{ flexBasis: "100%" }}>
          No mail server is set: send this link to the invitee yourself. <code>{link}</code>
        </div>
      )}
      <ErrorBox error={error} />
    </form>
  );
}

/** A member's role, changed or the member removed (the API keeps at least one Owner). */
function MemberPanel({ slug, member, onDone }: { slug: string; member: Member; onDone: () => void }) {
  const [role, setRole] = useState(member.role_name);
  const [error, setError] = useState<Error>();
  async function act(work: () => Promise<unknown>) {
    setError(undefined);
    try {
      await work();
      onDone();
    } catch (e) {
      setError(e as Error);
    }
  }
  const path = `/v1/organizations/${slug}/members/${member.user_id}`;
  return (
    <div className="card form-row" aria-label="Member">
      <strong>{member.email ?? member.user_name}</strong>
      <label className="field">
        <span>Role</span>
        <select aria-label="Member role" value={role} onChange={(e) => setRole(e.target.value)}>
          {ROLES.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
      </label>
      <button
        className="button primary"
        onClick={() => void act(() => mgmt.patch(path, { role_name: role }))}
      >
        Save role
      </button>
      <button
        className="button danger"
        onClick={() =>
          window.confirm(`Remove ${member.email ?? member.user_name}?`) && void act(() => mgmt.delete(path))
        }
      >
        Remove member
      </button>
      <ErrorBox error={error} />
    </div>
  );
}

export default function Organization() {
  const { slug } = useParams() as { slug: string };
  const org = useAsync(() => mgmt.get<Org>(`/v1/organizations/${slug}`), [slug]);
  const projects = useAsync(() => mgmt.get<Project[]>("/v1/projects"), []);
  const members = useAsync(() => mgmt.get<Member[]>(`/v1/organizations/${slug}/members`), [slug]);
  const [selected, setSelected] = useState<Member>();
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
        <Invite slug={slug} onDone={members.reload} />
        {selected && (
          <MemberPanel
            key={selected.user_id}
            slug={slug}
            member={selected}
            onDone={() => {
              setSelected(undefined);
              members.reload();
            }}
          />
        )}
        <ErrorBox error={members.error} />
        {members.data && (
          <DataGrid
            rows={members.data as unknown as Record<string, unknown>[]}
            columns={["user_name", "email", "role_name", "mfa_enabled"]}
            height={240}
            onRowClick={(_row, index) => setSelected(members.data![index])}
            rowLabel={(row) => String(row.email ?? row.user_name)}
          />
        )}
      </section>
    </div>
  );
}
