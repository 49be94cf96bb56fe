import { useEffect, useRef, useState, type MouseEvent, type RefObject } from "react";
import { NavLink, useLocation } from "react-router-dom";

/** The id the menu button's aria-controls points at. */
export const MAIN_NAV_ID = "main-nav";

export interface CollapsibleNav {
  open: boolean;
  toggle: () => void;
  close: () => void;
  buttonRef: RefObject<HTMLButtonElement | null>;
}

/**
 * Open/closed state of the main navigation on narrow screens (below the breakpoint in
 * styles.css it is hidden behind a menu button). It closes when the location changes and on
 * Escape, which also returns focus to the menu button so keyboard users are not left on a
 * link that just disappeared.
 */
export function useCollapsibleNav(): CollapsibleNav {
  const [open, setOpen] = useState(false);
  const buttonRef = useRef<HTMLButtonElement>(null);
  const { key } = useLocation();
  useEffect(() => setOpen(false), [key]);
  useEffect(() => {
    if (!open) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "Escape") return;
      setOpen(false);
      buttonRef.current?.focus();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [open]);
  return { open, toggle: () => setOpen((o) => !o), close: () => setOpen(false), buttonRef };
}

/** The topbar's menu button: shown only below the breakpoint (CSS), a disclosure for the nav. */
export function MenuButton({ nav }: { nav: CollapsibleNav }) {
  return (
    <button
      ref={nav.buttonRef}
      type="button"
      className="menu-button"
      aria-expanded={nav.open}
      aria-controls={MAIN_NAV_ID}
      onClick={nav.toggle}
    >
      <span aria-hidden="true">☰</span> Menu
    </button>
  );
}

/** The console's page links; `data-open` lets CSS show it on narrow screens while open. */
export function MainNav({ nav, admin }: { nav: CollapsibleNav; admin: boolean }) {
  // a click on the page already shown does not change the location: close explicitly
  const onClick = (e: MouseEvent) => {
    if ((e.target as HTMLElement).closest("a")) nav.close();
  };
  return (
    <nav id={MAIN_NAV_ID} className="sidebar" aria-label="Main" data-open={nav.open} onClick={onClick}>
      <NavLink to="/" end>Overview</NavLink>
      <NavLink to="/topics">Topics</NavLink>
      <NavLink to="/groups">Consumer groups</NavLink>
      <NavLink to="/brokers">Brokers</NavLink>
      <NavLink to="/reports">Reports</NavLink>
      {admin && (
        <>
          <span className="nav-heading">Access</span>
          <NavLink to="/access/service-accounts">Service accounts</NavLink>
          <NavLink to="/access/api-keys">API keys</NavLink>
          <NavLink to="/access/acls">ACLs</NavLink>
          <NavLink to="/access/quotas">Quotas</NavLink>
          <NavLink to="/access/audit">Audit log</NavLink>
        </>
      )}
    </nav>
  );
}
