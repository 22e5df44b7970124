/**
 * What a form's account and password are for:
 * - `sign-in`: the browser's saved account signs in (its current password);
 * - `join`: the person at the keyboard sets their own new password (user name optional);
 * - `new-user`: an administrator makes someone else's account: no autofill of the administrator's own,
 *   and the password may stay empty (the same form sends an invitation instead).
 */
export type PasswordPurpose = "sign-in" | "join" | "new-user";

export interface PasswordFieldsProps {
  purpose: PasswordPurpose;
  /** The account's name: its email address, or a user name (only when joining, where it is optional). */
  account: { field: "email" | "username"; value: string; onChange: (value: string) => void };
  password: string;
  onPassword: (value: string) => void;
}

/** The account and password fields of Studio's sign-in, invitation and new-user forms. */
export function PasswordFields({ purpose, account, password, onPassword }: PasswordFieldsProps) {
  const email = account.field === "email";
  return (
    <>
      <label className="field">
        <span>{email ? "Email" : "User name (optional)"}</span>
        <input
          name={account.field}
          type={email ? "email" : undefined}
          autoComplete={purpose === "new-user" ? undefined : "username"}
          value={account.value}
          onChange={(e) => account.onChange(e.target.value)}
          required={email}
        />
      </label>
      <label className="field">
        <span>Password</span>
        <input
          name="password"
          type="password"
          autoComplete={purpose === "sign-in" ? "current-password" : "new-password"}
          value={password}
          onChange={(e) => onPassword(e.target.value)}
          required={purpose !== "new-user"}
        />
      </label>
    </>
  );
}
