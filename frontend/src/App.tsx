import { Navigate, Route, Routes } from "react-router-dom";
import { atLeast, useMe, useSignOut, useSwitchOrganisation } from "./api/hooks/auth";
import { ErrorState, Loading } from "./components/States";
import { InvitationList } from "./components/Invitations";
import { MainNav, MenuButton, useCollapsibleNav } from "./components/Navigation";
import { useAnswerInvitation, useMyInvitations } from "./api/hooks/invitations";
import { SignIn } from "./pages/SignIn";
import { Overview } from "./pages/Overview";
import { Topics } from "./pages/Topics";
import { TopicDetailPage } from "./pages/TopicDetail";
import { Groups } from "./pages/Groups";
import { GroupDetailPage } from "./pages/GroupDetail";
import { Brokers } from "./pages/Brokers";
import { Reports } from "./pages/Reports";
import { ServiceAccounts } from "./pages/access/ServiceAccounts";
import { ApiKeys } from "./pages/access/ApiKeys";
import { Acls } from "./pages/access/Acls";
import { Quotas } from "./pages/access/Quotas";
import { Audit } from "./pages/access/Audit";

function OrganisationSwitcher() {
  const me = useMe().data;
  const sw = useSwitchOrganisation();
  if (!me) return null;
  return (
    <label className="org-switcher">
      <span className="sr-only">Organisation</span>
      <select
        aria-label="Organisation"
        value={me.organisation?.id ?? ""}
        onChange={(e) => sw.mutate(e.target.value)}
        disabled={sw.isPending}
      >
        {!me.organisation && <option value="">Choose an organisation…</option>}
        {me.memberships.map((m) => (
          <option key={m.organisation.id} value={m.organisation.id}>
            {m.organisation.name} ({m.role})
          </option>
        ))}
      </select>
    </label>
  );
}

function PendingInvitations() {
  const invitations = useMyInvitations();
  const answer = useAnswerInvitation();
  return (
    <InvitationList
      invitations={invitations.data ?? []}
      onAnswer={(id, accept) => answer.mutate({ id, accept })}
      busy={answer.isPending}
      error={answer.error}
    />
  );
}

function Shell() {
  const me = useMe().data!;
  const signOut = useSignOut();
  const admin = atLeast(me.role, "admin");
  const nav = useCollapsibleNav();
  return (
    <div className="shell">
      <header className="topbar">
        <span className="brand">Sluice</span>
        <OrganisationSwitcher />
        <span className="who">
          {me.username} · <span data-testid="role">{me.role ?? "no organisation"}</span>
        </span>
        <button type="button" onClick={() => signOut.mutate()}>
          Sign out
        </button>
        {/* last in the header, so Tab goes from it straight into the links it opens */}
        <MenuButton nav={nav} />
      </header>
      <MainNav nav={nav} admin={admin} />
      <main className="content">
        <PendingInvitations />
        {!me.organisation ? (
          <p className="state empty">Choose an organisation above to see its topics and groups.</p>
        ) : (
          // keyed by organisation: a switch remounts the pages, so no page's local state
          // (live rates, half-filled forms) carries over from the previous organisation
          <Routes key={me.organisation.id}>
            <Route path="/" element={<Overview />} />
            <Route path="/topics" element={<Topics />} />
            <Route path="/topics/:name/*" element={<TopicDetailPage />} />
            <Route path="/groups" element={<Groups />} />
            <Route path="/groups/:groupId" element={<GroupDetailPage />} />
            <Route path="/brokers" element={<Brokers />} />
            <Route path="/reports" element={<Reports />} />
            <Route path="/access/service-accounts" element={<ServiceAccounts />} />
            <Route path="/access/api-keys" element={<ApiKeys />} />
            <Route path="/access/acls" element={<Acls />} />
            <Route path="/access/quotas" element={<Quotas />} />
            <Route path="/access/audit" element={<Audit />} />
            <Route path="/sign-in" element={<Navigate to="/" replace />} />
            <Route path="*" element={<p className="state empty">There is no page here. Pick one from the navigation.</p>} />
          </Routes>
        )}
      </main>
    </div>
  );
}

export function App() {
  const me = useMe();
  if (me.isPending) return <Loading what="your session" />;
  if (me.isError) return <ErrorState error={me.error} what="your session" onRetry={() => me.refetch()} />;
  if (!me.data) return <SignIn />;
  return <Shell />;
}
