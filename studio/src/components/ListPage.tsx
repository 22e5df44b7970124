import type { ReactNode } from "react";
import { DataGrid, type Row } from "./DataGrid";
import { Empty, ErrorBox, PageHeader, Spinner } from "./Feedback";
import type { Async } from "../useAsync";

/** A page that lists one kind of object in a grid: its title, actions, loading state and the API's error. */
export function ListPage({
  title,
  list,
  columns,
  empty,
  actions,
  children,
  onRowClick,
  selectedIndex,
}: {
  title: string;
  list: Async<Row[]>;
  columns: string[];
  empty: string;
  actions?: ReactNode;
  children?: ReactNode;
  onRowClick?: (row: Row, index: number) => void;
  selectedIndex?: number;
}) {
  return (
    <div className="page">
      <PageHeader title={title}>{actions}</PageHeader>
      {children}
      <ErrorBox error={list.error} />
      {list.loading && !list.data && <Spinner />}
      {list.data &&
        (list.data.length ? (
          <DataGrid
            rows={list.data}
            columns={columns}
            height="calc(100vh - 200px)"
            onRowClick={onRowClick}
            selectedIndex={selectedIndex}
          />
        ) : (
          <Empty>{empty}</Empty>
        ))}
    </div>
  );
}
