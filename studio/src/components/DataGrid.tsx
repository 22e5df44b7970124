import { useMemo, useRef, type ReactNode } from "react";
import { columnSizingFeature, createColumnHelper, tableFeatures, useTable } from "@tanstack/react-table";
import { useVirtualizer } from "@tanstack/react-virtual";

export type Row = Record<string, unknown>;

export interface Sort {
  column: string;
  ascending: boolean;
}

const features = tableFeatures({ columnSizingFeature });
const helper = createColumnHelper<typeof features, Row>();
const ROW_HEIGHT = 34;
const CHAR_PX = 7.5;

/** A column's width from its name and the first rows' values: wide enough to read, at most 420 px. */
function widthOf(name: string, rows: Row[]): number {
  let chars = name.length + 3;
  for (const row of rows.slice(0, 50)) chars = Math.max(chars, display(row[name]).length);
  return Math.round(Math.min(420, Math.max(90, chars * CHAR_PX + 24)));
}

/** How a value shows in a cell: null apart, JSON as JSON. */
export function display(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/**
 * A grid of rows: TanStack Table for the columns, TanStack Virtual for the rows (only those in view are in the
 * page, so a result of 100,000 rows scrolls as one of 10). Sorting, when given, is the server's: a header
 * click asks `onSort` and the rows come back ordered.
 */
export function DataGrid({
  rows,
  columns,
  height = 480,
  sort,
  onSort,
  onRowClick,
  selectedIndex,
  rowLabel,
  headerExtra,
}: {
  rows: Row[];
  columns: string[];
  height?: number | string;
  sort?: Sort;
  onSort?: (sort: Sort) => void;
  onRowClick?: (row: Row, index: number) => void;
  selectedIndex?: number;
  rowLabel?: (row: Row) => string;
  headerExtra?: (column: string) => ReactNode;
}) {
  // Widths follow the first rows of a new column set, not every page of rows.
  const sample = rows.length > 0;
  const columnDefs = useMemo(
    () =>
      helper.columns(
        columns.map((name) =>
          helper.accessor((row: Row) => row[name], {
            id: name,
            header: name,
            size: widthOf(name, rows),
            cell: (info) => {
              const value = info.getValue();
              return <span className={value === null ? "null" : undefined}>{display(value)}</span>;
            },
          }),
        ),
      ),
    // Not `rows`: the widths are sampled once per column set (and once rows first arrive).
    [columns, sample],
  );
  const table = useTable({ features, columns: columnDefs, data: rows });
  const scrollRef = useRef<HTMLDivElement>(null);
  const modelRows = table.getRowModel().rows;
  const virtualizer = useVirtualizer({
    count: modelRows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 10,
  });
  const width = table.getTotalSize();

  return (
    <div className="grid" ref={scrollRef} style={{ height }} role="table" aria-rowcount={rows.length + 1}>
      <div className="grid-head" role="row" style={{ width }}>
        {table.getHeaderGroups()[0]?.headers.map((header) => {
          const name = header.column.id;
          const sorted = sort?.column === name ? (sort.ascending ? "ascending" : "descending") : "none";
          return (
            <div
              key={header.id}
              className="grid-cell grid-th"
              role="columnheader"
              aria-sort={sorted}
              style={{ width: header.getSize() }}
            >
              {onSort ? (
                <button
                  className="grid-sort"
                  onClick={() =>
                    onSort({ column: name, ascending: sort?.column === name ? !sort.ascending : true })
                  }
                  aria-label={`Sort by ${name}`}
                >
                  {name}
                  <span aria-hidden="true">
                    {sorted === "ascending" ? " ▲" : sorted === "descending" ? " ▼" : ""}
                  </span>
                </button>
              ) : (
                <table.FlexRender header={header} />
              )}
              {headerExtra?.(name)}
            </div>
          );
        })}
      </div>
      <div style={{ height: virtualizer.getTotalSize(), width, position: "relative" }}>
        {virtualizer.getVirtualItems().map((item) => {
          const row = modelRows[item.index];
          return (
            <div
              key={row.id}
              role="row"
              aria-rowindex={item.index + 2}
              aria-label={rowLabel?.(row.original)}
              aria-selected={selectedIndex === item.index || undefined}
              className={`grid-row${selectedIndex === item.index ? " selected" : ""}${onRowClick ? " clickable" : ""}`}
              style={{ transform: `translateY(${item.start}px)`, height: ROW_HEIGHT }}
              onClick={onRowClick && (() => onRowClick(row.original, item.index))}
            >
              {row.getAllCells().map((cell) => (
                <div key={cell.id} role="cell" className="grid-cell" style={{ width: cell.column.getSize() }}>
                  <table.FlexRender cell={cell} />
                </div>
              ))}
            </div>
          );
        })}
      </div>
      {!rows.length && <div className="grid-empty">No rows</div>}
    </div>
  );
}
