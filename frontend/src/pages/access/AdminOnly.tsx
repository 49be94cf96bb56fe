import type { ReactNode } from "react";
import { atLeast, useMe } from "../../api/hooks/auth";

export function AdminOnly({ children }: { children: ReactNode }) {
  const me = useMe().data;
  if (!atLeast(me?.role, "admin")) {
    return <p className="state empty">Only admins and owners manage access. Ask one of them for a change.</p>;
  }
  return <>{children}</>;
}
