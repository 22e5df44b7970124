import { useState, type FormEvent } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { account } from "../api";
import { ErrorBox } from "../components/Feedback";
import { PasswordFields } from "../components/PasswordFields";
import { useAction } from "../useAction";

/** The page an invitation's link opens (`/join?token=...&slug=...`): set a password, then sign in. */
export default function Join() {
  const [params] = useSearchParams();
  const token = params.get("token") ?? "";
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const { busy, error, run } = useAction();
  const navigate = useNavigate();

  async function submit(e: FormEvent) {
    e.preventDefault();
    await run(async () => {
      const accepted = await account.acceptInvitation(token, password, username.trim() || undefined);
      const next = new URLSearchParams({ email: accepted.user.email, joined: accepted.organization.name });
      navigate(`/sign-in?${next}`, { replace: true });
    });
  }

  return (
    <div className="sign-in">
      <form className="card sign-in-card" onSubmit={(e) => void submit(e)} aria-label="Accept invitation">
        <h1>Join {params.get("slug") ?? "an organization"}</h1>
        <p className="muted">
          Choose your password (an existing account gives its own) to accept the invitation.
        </p>
        <PasswordFields
          purpose="join"
          account={{ field: "username", value: username, onChange: setUsername }}
          password={password}
          onPassword={setPassword}
        />
        <ErrorBox error={error ?? (token ? undefined : new Error("This link has no invitation token"))} />
        <button className="button primary" type="submit" disabled={busy || !token}>
          {busy ? "Joining…" : "Accept invitation"}
        </button>
      </form>
    </div>
  );
}
