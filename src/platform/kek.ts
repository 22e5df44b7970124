import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import type pg from "pg";
import { sql } from "pg-sql2";

/**
 * Secrets the control plane keeps (JWT secrets, role passwords, cluster admin URLs, function-secret root keys)
 * are stored sealed with a key-encryption key that is not in the database: `STRATA_KEK`, or an owner-only
 * file `kek` in the data directory, made on first start. AES-256-GCM with a key derived per purpose (HKDF),
 * so a value sealed for one column does not open as another.
 */

const SEALED = "kek1:";
const FILE = "kek";
const NEXT_FILE = "kek.next";

export class KeyEncryptionKey {
  constructor(private readonly key: Buffer) {}

  private keyFor(purpose: string): Buffer {
    return Buffer.from(hkdfSync("sha256", this.key, "strata-kek", purpose, 32));
  }

  seal(plain: string, purpose: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.keyFor(purpose), iv);
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return SEALED + Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url");
  }

  /**
   * A secret derived from the key for `purpose` (a login role's password): every node of the installation
   * gets the same one, and it is stored nowhere. A new key (rotation) derives a new one.
   */
  derivedSecret(purpose: string): string {
    return this.keyFor(`derived:${purpose}`).toString("base64url");
  }

  /** The plain value; a value stored before sealing existed passes through (start-up seals those). */
  open(stored: string, purpose: string): string {
    if (!isSealed(stored)) return stored;
    const raw = Buffer.from(stored.slice(SEALED.length), "base64url");
    const decipher = createDecipheriv("aes-256-gcm", this.keyFor(purpose), raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
  }
}

export const isSealed = (value: string): boolean => value.startsWith(SEALED);

function keyFromText(text: string): Buffer {
  // Any text of 32+ characters works; HKDF spreads it over the derived keys.
  return Buffer.from(text.trim(), "utf8");
}

function writeOwnerOnly(file: string, text: string) {
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600);
}

/** The key file of a data directory, made (owner-only) when missing. */
function keyFile(dataDir: string): string {
  mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, FILE);
  if (!existsSync(file)) writeOwnerOnly(file, randomBytes(32).toString("base64url") + "\n");
  return file;
}

/** The installation's key-encryption key: `STRATA_KEK` when set, else the data directory's key file. */
export function loadKek(dataDir: string, fromEnv: string | undefined): KeyEncryptionKey {
  if (fromEnv) return new KeyEncryptionKey(keyFromText(fromEnv));
  return new KeyEncryptionKey(keyFromText(readFileSync(keyFile(dataDir), "utf8")));
}

/**
 * A rotation interrupted after the database was re-sealed but before the new key file took the old one's
 * place: the next key, if it opens `probe` (a sealed value from the database), becomes the key.
 */
export function finishInterruptedRotation(dataDir: string, probe: string | undefined, purpose: string): void {
  const next = path.join(dataDir, NEXT_FILE);
  if (!existsSync(next) || !probe) return;
  try {
    new KeyEncryptionKey(keyFromText(readFileSync(next, "utf8"))).open(probe, purpose);
    renameSync(next, path.join(dataDir, FILE));
  } catch {
    // The database still holds values of the current key: the rotation never committed.
  }
}

/** Writes a new key as the pending next key; `commitKeyFile` makes it current after the database changed. */
export function prepareNextKey(dataDir: string): KeyEncryptionKey {
  const text = randomBytes(32).toString("base64url");
  writeOwnerOnly(path.join(dataDir, NEXT_FILE), text + "\n");
  return new KeyEncryptionKey(keyFromText(text));
}

export function commitKeyFile(dataDir: string): void {
  renameSync(path.join(dataDir, NEXT_FILE), path.join(dataDir, FILE));
}

/**
 * The control-plane pool (and every client it lends) carries its installation's key, so every reader of
 * platform rows can open them without threading the key through each call.
 */
const keys = new WeakMap<object, KeyEncryptionKey>();

export function attachKek(pool: pg.Pool, kek: KeyEncryptionKey): void {
  keys.set(pool, kek);
  // On every checkout: clients the pool opened before the key was attached carry it too.
  pool.on("acquire", (client) => keys.set(client, kek));
}

export function kekOf(holder: pg.Pool | pg.ClientBase): KeyEncryptionKey {
  const kek = keys.get(holder);
  if (!kek) throw new Error("this connection is not the control plane's: it has no key-encryption key");
  return kek;
}

/** Every sealed column: table, key column, value column. Its purpose is `table.column`. */
export const SEALED_COLUMNS = [
  ["platform.projects", "ref", "jwt_secret"],
  ["platform.projects", "ref", "sql_role_password"],
  ["platform.projects", "ref", "read_role_password"],
  ["platform.projects", "ref", "auth_role_password"],
  ["platform.clusters", "id", "admin_url"],
  ["platform.clusters", "id", "authenticator_password"],
  ["platform.project_root_keys", "project_ref", "root_key"],
  ["platform.api_keys", "id", "secret"],
  // A log drain's destination and headers (credentials), as one JSON text.
  ["platform.log_drains", "id", "config"],
  ["platform.saml_sp_keys", "project_ref", "private_key"],
  ["platform.saml_sp_keys", "project_ref", "certificate"],
  // jsonb: sealed, the JWK is stored as a JSON string.
  ["platform.signing_keys", "id", "private_jwk"],
  // The private half of each project's vault key (src/modules/vault.ts).
  ["platform.vault_keys", "project_ref", "private_key"],
] as const;

const JSONB_COLUMNS = new Set(["platform.signing_keys.private_jwk"]);

export type SealedColumn = (typeof SEALED_COLUMNS)[number];
export const purposeOf = (c: SealedColumn) => `${c[0]}.${c[2]}`;

/** Fields of a project's auth config (platform.auth_config.config) that hold secrets: stored sealed. */
export const isSecretAuthField = (field: string): boolean =>
  field === "smtp_pass" ||
  /_secrets?$/.test(field) ||
  // The SMS providers' credentials (sms_twilio_auth_token, sms_vonage_api_secret, ...).
  /^sms_[a-z_]+_(auth_token|access_key|api_key|api_secret)$/.test(field);
export const authFieldPurpose = (field: string) => `platform.auth_config.${field}`;

/** Re-seals the secret fields of every project's auth config, as resealColumns does for columns. */
async function resealAuthConfig(client: pg.ClientBase, to: KeyEncryptionKey, from?: KeyEncryptionKey) {
  const { rows } = await client.query("select project_ref, config from platform.auth_config");
  for (const row of rows) {
    const config = row.config as Record<string, unknown>;
    let changed = false;
    for (const [field, value] of Object.entries(config)) {
      if (!isSecretAuthField(field) || typeof value !== "string" || value === "") continue;
      const sealedBefore = isSealed(value);
      if (!from && sealedBefore) continue;
      const plain = from && sealedBefore ? from.open(value, authFieldPurpose(field)) : value;
      config[field] = to.seal(plain, authFieldPurpose(field));
      changed = true;
    }
    if (changed) {
      await client.query("update platform.auth_config set config = $2 where project_ref = $1", [
        row.project_ref,
        JSON.stringify(config),
      ]);
    }
  }
}

/**
 * Re-seals every sealed column with `to`: values are opened with `from` (a rotation) or, without it, only
 * values stored in plain text are sealed (an installation from before sealing). Run in one transaction.
 */
export async function resealColumns(
  client: pg.ClientBase,
  to: KeyEncryptionKey,
  from?: KeyEncryptionKey,
): Promise<void> {
  for (const column of SEALED_COLUMNS) {
    const [table, key, value] = column;
    const purpose = purposeOf(column);
    const target = sql.identifier(...table.split("."));
    const select = sql.compile(
      sql`select ${sql.identifier(key)} as k, ${sql.identifier(value)} as v from ${target} where ${sql.identifier(value)} is not null`,
    );
    const jsonb = JSONB_COLUMNS.has(purpose);
    for (const row of (await client.query(select.text, select.values as unknown[])).rows) {
      // A jsonb column holds either the plain JSON value or the sealed text as a JSON string.
      const stored: string = jsonb && typeof row.v !== "string" ? JSON.stringify(row.v) : row.v;
      const sealedBefore = typeof row.v === "string" && isSealed(row.v);
      if (!from && sealedBefore) continue;
      const plain = from && sealedBefore ? from.open(stored, purpose) : stored;
      const sealed = sql.value(to.seal(plain, purpose));
      const update = sql.compile(
        sql`update ${target} set ${sql.identifier(value)} = ${jsonb ? sql`to_jsonb(${sealed}::text)` : sealed} where ${sql.identifier(key)} = ${sql.value(row.k)}`,
      );
      await client.query(update.text, update.values as unknown[]);
    }
  }
  await resealAuthConfig(client, to, from);
}
