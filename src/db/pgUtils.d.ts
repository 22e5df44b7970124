/** node-postgres's own parameter serialisation (not in @types/pg). */
declare module "pg/lib/utils" {
  /** A parameter as pg sends it: arrays as array literals, dates and JSON as text, bytea as a Buffer. */
  export function prepareValue(value: unknown): string | Buffer | null | undefined;
}
