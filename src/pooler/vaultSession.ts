import type net from "node:net";
import { VAULT_SESSION_COPY, vaultSessionRow } from "../modules/vault";
import type { ProjectRuntime } from "../projects/runtime";
import { errorCode, ServerMessageReader, type ServerMessage } from "./protocol";

/**
 * The project's owner's own sessions through the listener get the project's vault key, as the sessions Strata
 * opens for the owner do (src/modules/vault.ts), so `vault.decrypted_secrets` decrypts in psql or a driver
 * logged in as `postgres`, as on the platform. Once PostgreSQL has authenticated the owner (the password was
 * checked by PostgreSQL itself) and before the client gets its first ReadyForQuery, the listener runs three
 * statements of its own in the session: `vault._strata_session_open()`, a COPY of the key into the session's
 * temporary table that only strata_vault may read (COPY data is never logged), `vault._strata_session_seal()`.
 * Until then the client may send nothing but its password messages (listener.ts holds it to that), so none of
 * its statements runs between them. The key is then in no table, file or log, and readable by no role: the
 * session decrypts through the view, for the roles granted it (the owner, service_role). A project without
 * vault, or a session where a step fails (a role setting of the owner's, say), is handed over without the key:
 * decrypted_secrets then raises there, as in any session without it.
 */

/** How long the three steps may take before the session is handed over without the key. */
const STEPS_TIMEOUT_MS = 10_000;

/** A message of the protocol: type byte, length, body. */
export function protocolMessage(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, "latin1");
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}

const cstring = (text: string) => Buffer.from(`${text}\0`, "utf8");

/** The listener's own statements on a session, before the client has it. */
class Conversation {
  private readonly reader = new ServerMessageReader();
  private readonly received: ServerMessage[] = [];
  private wake: (() => void) | undefined;
  private ended: Error | undefined;
  private readonly onData = (chunk: Buffer) => {
    try {
      this.received.push(...this.reader.push(chunk));
    } catch (e) {
      this.ended = e as Error;
    }
    this.wake?.();
  };
  private readonly onEnd = () => {
    this.ended ??= new Error("the session ended");
    this.wake?.();
  };

  constructor(private readonly socket: net.Socket) {
    socket.on("data", this.onData);
    socket.once("close", this.onEnd);
  }

  private async next(): Promise<ServerMessage> {
    while (!this.received.length) {
      if (this.ended) throw this.ended;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    return this.received.shift()!;
  }

  /**
   * Sends a simple query (with `copyRow` as its COPY data when the server asks for it) and reads its answer to
   * ReadyForQuery; answers the SQLSTATE of its error, if any.
   */
  async query(sql: string, copyRow?: string): Promise<string | undefined> {
    this.socket.write(protocolMessage("Q", cstring(sql)));
    let error: string | undefined;
    for (;;) {
      const m = await this.next();
      if (m.type === "E") error ??= errorCode(m.body) ?? "XX000";
      else if (m.type === "G") {
        if (copyRow === undefined) this.socket.write(protocolMessage("f", cstring("no COPY data here")));
        else {
          this.socket.write(protocolMessage("d", Buffer.from(copyRow, "utf8")));
          this.socket.write(protocolMessage("c"));
        }
      } else if (m.type === "Z") return error;
    }
  }

  close(): void {
    this.socket.off("data", this.onData);
    this.socket.off("close", this.onEnd);
  }
}

async function loadKey(conversation: Conversation, row: string): Promise<boolean> {
  // No vault in this database (no pgcrypto on its cluster): nothing to load.
  if (await conversation.query("select vault._strata_session_open()")) return false;
  if (await conversation.query(VAULT_SESSION_COPY, row)) return false;
  return !(await conversation.query("select vault._strata_session_seal()"));
}

/**
 * Loads the project's vault key into the owner's session on `upstream`, which has just sent its first
 * ReadyForQuery; answers whether the session has it. Throws when the key cannot be had or the session is in
 * no state to hand over (it ended, or a step timed out): the listener then closes it.
 */
export async function openOwnerVaultSession(upstream: net.Socket, project: ProjectRuntime): Promise<boolean> {
  const row = await vaultSessionRow(project);
  const conversation = new Conversation(upstream);
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      loadKey(conversation, row),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("the vault key's steps timed out")), STEPS_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    conversation.close();
  }
}
