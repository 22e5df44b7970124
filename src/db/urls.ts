/** Returns `url` pointing at database `name`. */
export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = "/" + encodeURIComponent(name);
  return u.toString();
}

/** Returns `url` logging in as `user` with `password`. */
export function withCredentials(url: string, user: string, password: string): string {
  const u = new URL(url);
  u.username = encodeURIComponent(user);
  u.password = encodeURIComponent(password);
  return u.toString();
}

export function databaseName(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1)) || "postgres";
}

/** Returns `url` on another port of the same host (a replica or restore cluster beside the primary). */
export function withPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}
