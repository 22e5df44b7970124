import { generateKeyPair } from "node:crypto";
import { promisify } from "node:util";
import { Readable } from "node:stream";
import type pg from "pg";
import type { Logger } from "../log";
import { kekOf } from "../platform/kek";
import { copyRowsInto } from "../projects/ownerLoad";
import type { ProjectRuntime } from "../projects/runtime";

/**
 * The project's vault key (sql/project/730_vault.sql). vault.create_secret encrypts in the database with
 * pgcrypto's OpenPGP public-key encryption, so it works in every session; the private key that decrypts is
 * kept out of the database: sealed with the key-encryption key in the control plane (`platform.vault_keys`,
 * re-sealed by `kek rotate`, which leaves the key pair as it is, so sessions holding it stay right), and loaded by
 * Strata only into its own sessions: those it opens for the project's owner (the Management API's SQL and
 * migrations, cron jobs, the owner's sessions through the database listener) and each connection of the data
 * pool, where vault.decrypted_secrets then decrypts for the roles granted it (the owner, service_role).
 *
 * Into such a session the key travels by COPY (COPY data is never logged, unlike a statement's parameters,
 * which a role may have logged on error), into a temporary table that strata_vault owns and the session's
 * login may fill only until `_strata_session_seal`. Tenant code in the session can decrypt through the view,
 * as the owner may, but cannot read the table, and the key is in no table, dump, log or answer.
 */

const PRIVATE_KEY_PURPOSE = "platform.vault_keys.private_key";

/** An OpenPGP RSA key as pgcrypto reads it: one subkey packet (public or secret, the secret unprotected). */
interface VaultKeyPair {
  publicKey: Buffer;
  privateKey: Buffer;
}

/** An OpenPGP multiprecision integer: its bit count, then its bytes without leading zeros. */
function mpi(value: Buffer): Buffer {
  let start = 0;
  while (start < value.length - 1 && value[start] === 0) start++;
  const bytes = value.subarray(start);
  const bits = (bytes.length - 1) * 8 + (bytes[0] === 0 ? 0 : Math.floor(Math.log2(bytes[0])) + 1);
  const header = Buffer.alloc(2);
  header.writeUInt16BE(bits);
  return Buffer.concat([header, bytes]);
}

/** A new-format OpenPGP packet. */
function packet(tag: number, body: Buffer): Buffer {
  let length: Buffer;
  if (body.length < 192) length = Buffer.from([body.length]);
  else if (body.length < 8384)
    length = Buffer.from([((body.length - 192) >> 8) + 192, (body.length - 192) & 0xff]);
  else {
    length = Buffer.alloc(5);
    length[0] = 0xff;
    length.writeUInt32BE(body.length, 1);
  }
  return Buffer.concat([Buffer.from([0xc0 | tag]), length, body]);
}

const PUBLIC_SUBKEY = 14;
const SECRET_SUBKEY = 7;
const RSA = 1;

/** A fresh RSA key pair as OpenPGP subkey packets (pgcrypto skips a main key and uses the encryption subkey). */
async function generateVaultKeyPair(): Promise<VaultKeyPair> {
  const { privateKey } = await promisify(generateKeyPair)("rsa", { modulusLength: 2048 });
  const jwk = privateKey.export({ format: "jwk" });
  const part = (name: "n" | "e" | "d" | "p" | "q" | "qi") => mpi(Buffer.from(jwk[name]!, "base64url"));
  const created = Buffer.alloc(4);
  created.writeUInt32BE(Math.floor(Date.now() / 1000));
  const publicBody = Buffer.concat([Buffer.from([4]), created, Buffer.from([RSA]), part("n"), part("e")]);
  // OpenPGP's u is p⁻¹ mod q; the JWK's qi is q⁻¹ mod p: its p and q, swapped, give OpenPGP's.
  const secretParts = Buffer.concat([part("d"), part("q"), part("p"), part("qi")]);
  const checksum = Buffer.alloc(2);
  checksum.writeUInt16BE(secretParts.reduce((sum, byte) => (sum + byte) & 0xffff, 0));
  return {
    publicKey: packet(PUBLIC_SUBKEY, publicBody),
    privateKey: packet(SECRET_SUBKEY, Buffer.concat([publicBody, Buffer.from([0]), secretParts, checksum])),
  };
}

/** Keys opened this process, by project ref (every node reads the same row). */
const opened = new Map<string, Promise<VaultKeyPair>>();

/** The project's key pair from the control plane, made (once across nodes) when it has none yet. */
function vaultKeyPair(platformPool: pg.Pool, ref: string): Promise<VaultKeyPair> {
  let keys = opened.get(ref);
  if (!keys) {
    keys = loadOrMake(platformPool, ref);
    opened.set(ref, keys);
    keys.catch(() => opened.delete(ref));
  }
  return keys;
}

async function loadOrMake(platformPool: pg.Pool, ref: string): Promise<VaultKeyPair> {
  const kek = kekOf(platformPool);
  const read = () =>
    platformPool.query("select public_key, private_key from platform.vault_keys where project_ref = $1", [
      ref,
    ]);
  let { rows } = await read();
  if (!rows.length) {
    // Another node may make one at the same moment: the first stored is the project's.
    const made = await generateVaultKeyPair();
    await platformPool.query(
      `insert into platform.vault_keys (project_ref, public_key, private_key) values ($1, $2, $3)
       on conflict (project_ref) do nothing`,
      [
        ref,
        made.publicKey.toString("base64"),
        kek.seal(made.privateKey.toString("base64"), PRIVATE_KEY_PURPOSE),
      ],
    );
    ({ rows } = await read());
  }
  return {
    publicKey: Buffer.from(rows[0].public_key, "base64"),
    privateKey: Buffer.from(kek.open(rows[0].private_key, PRIVATE_KEY_PURPOSE), "base64"),
  };
}

/**
 * Writes the project's public key into its database where vault is installed and has none (or another one),
 * on `admin`, a superuser connection to that database: a row of Strata's table, the value bound.
 */
export async function provideVaultKey(
  platformPool: pg.Pool,
  ref: string,
  admin: pg.ClientBase,
): Promise<void> {
  const installed = await admin.query(
    "select to_regclass('vault._strata_public_key') is not null as installed",
  );
  if (!installed.rows[0].installed) return;
  const { rows } = await admin.query("select k.key from vault._strata_public_key k");
  const { publicKey } = await vaultKeyPair(platformPool, ref);
  if (rows[0] && publicKey.equals(rows[0].key)) return;
  await admin.query(
    `insert into vault._strata_public_key (key) values ($1)
     on conflict (singleton) do update set key = excluded.key`,
    [publicKey],
  );
}

/** Projects whose database had their public key when this process last looked. */
const provided = new WeakSet<ProjectRuntime>();

/**
 * Gives a session Strata opened on the project's SQL login (before it acts as the owner) the project's private
 * key, so vault.decrypted_secrets decrypts in it. A project without vault (no pgcrypto on its cluster) is left
 * as it is.
 */
export async function openVaultSession(client: pg.ClientBase, project: ProjectRuntime): Promise<void> {
  const installed = await client.query(
    "select pg_catalog.to_regprocedure('vault._strata_session_open()') is not null as installed",
  );
  if (!installed.rows[0].installed) return;
  if (!provided.has(project)) {
    const admin = await project.adminPool.connect();
    try {
      await provideVaultKey(project.platformPool, project.ref, admin);
    } finally {
      admin.release();
    }
    provided.add(project);
  }
  await client.query("select vault._strata_session_open()");
  await copyRowsInto(client, VAULT_SESSION_COPY, Readable.from([await vaultSessionRow(project)]));
  await client.query("select vault._strata_session_seal()");
}

/**
 * Gives a new connection of the project's data pool (`authenticator_<ref>`, before its first request) the
 * project's private key, so vault.decrypted_secrets decrypts in data requests for the roles granted it:
 * service_role and the owner's security-definer functions. anon and authenticated still have no privilege on
 * the view nor on `vault._decrypt`, and the key table is strata_vault's alone whatever role a later request of
 * the connection takes. Nothing between requests drops it (Strata runs no DISCARD on the data pool; a tenant
 * function that does only loses the key for the connection). Where the key cannot be loaded the connection
 * serves without it (decrypted_secrets raises there) and without a half-made key table.
 */
export async function openDataVaultSession(
  client: pg.ClientBase,
  project: ProjectRuntime,
  log: Logger,
): Promise<void> {
  try {
    await openVaultSession(client, project);
  } catch (e) {
    log.warn({ ref: project.ref, err: (e as Error).message }, "data connection opened without the vault key");
    await client.query("discard temp");
  }
}

/** The COPY that fills a session's key table, between `_strata_session_open` and `_strata_session_seal`. */
export const VAULT_SESSION_COPY = "copy pg_temp.strata_vault_session (key) from stdin";

/** The row of VAULT_SESSION_COPY: the project's private key as COPY text of a bytea. */
export async function vaultSessionRow(project: ProjectRuntime): Promise<string> {
  const { privateKey } = await vaultKeyPair(project.platformPool, project.ref);
  return `\\\\x${privateKey.toString("hex")}\n`;
}
