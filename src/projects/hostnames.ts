import type pg from "pg";

/**
 * The host names served for projects besides `<ref>.<STRATA_DOMAIN>` (activated custom hostnames, vanity
 * subdomains), kept in memory so that resolving a request's Host costs no query. Reloaded when any process
 * changes them (the registry's control-plane listener) and after a change made here.
 */
export class HostDirectory {
  private refs = new Map<string, string>();

  constructor(private readonly platformPool: pg.Pool) {}

  async reload(): Promise<void> {
    const { rows } = await this.platformPool.query<{ hostname: string; project_ref: string }>(
      `select hostname, project_ref from platform.project_hostnames
        where kind = 'vanity' or status = '5_services_reconfigured'`,
    );
    this.refs = new Map(rows.map((r) => [r.hostname, r.project_ref]));
  }

  /** The project a served host name belongs to (lower-case, without port). */
  refOf(hostname: string): string | undefined {
    return this.refs.get(hostname);
  }
}
