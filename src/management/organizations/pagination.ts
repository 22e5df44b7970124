import type { CursorPage } from "./shapes";

export interface Links {
  first: string | null;
  prev: string | null;
  next: string | null;
  last: string | null;
}

/**
 * One page of `items` (sorted by their ids) for a JSON:API cursor: after an id, before an id, or the first
 * page; `links` are relative paths of the same listing.
 */
export function cursorPage<T extends { id: string }>(
  items: T[],
  page: CursorPage,
  basePath: string,
): { data: T[]; links: Links } {
  const size = page["page[size]"];
  let start = 0;
  if (page["page[after]"]) start = items.findIndex((i) => i.id > page["page[after]"]!);
  else if (page["page[before]"]) {
    const end = items.findIndex((i) => i.id >= page["page[before]"]!);
    start = Math.max(0, (end === -1 ? items.length : end) - size);
  }
  if (start === -1) start = items.length;
  const data = items.slice(start, start + size);
  const link = (cursor?: string) => `${basePath}?page[size]=${size}${cursor ? `&${cursor}` : ""}`;
  const lastStart = Math.max(0, items.length - size);
  return {
    data,
    links: {
      first: link(),
      prev: start > 0 && data.length ? link(`page[before]=${encodeURIComponent(data[0].id)}`) : null,
      next:
        start + size < items.length && data.length
          ? link(`page[after]=${encodeURIComponent(data[data.length - 1].id)}`)
          : null,
      last: lastStart > 0 ? link(`page[after]=${encodeURIComponent(items[lastStart - 1].id)}`) : link(),
    },
  };
}
