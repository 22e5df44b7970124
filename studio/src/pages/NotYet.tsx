import { useLocation } from "react-router";
import { Empty, PageHeader } from "../components/Feedback";

/** A page path of the platform Studio does not have yet. */
export default function NotYet() {
  const { pathname } = useLocation();
  return (
    <div className="page">
      <PageHeader title="Not in Studio yet" />
      <Empty>
        <code>{pathname}</code> has no page yet; the Management API serves it meanwhile.
      </Empty>
    </div>
  );
}
