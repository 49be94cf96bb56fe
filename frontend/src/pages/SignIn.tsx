import { useState } from "react";
import { useSignIn } from "../api/hooks/auth";
import { Field } from "../components/Field";
import { FormError } from "../components/States";

export function SignIn() {
  const signIn = useSignIn();
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  return (
    <main className="sign-in">
      <h1>Sign in to Sluice</h1>
      <form
        className="form"
        aria-label="Sign in"
        onSubmit={(e) => {
          e.preventDefault();
          signIn.mutate({ username, password });
        }}
      >
        <Field label="Username">
          {(a) => <input {...a} autoFocus autoComplete="username" value={username} onChange={(e) => setUsername(e.target.value)} required />}
        </Field>
        <Field label="Password">
          {(a) => (
            <input {...a} type="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} required />
          )}
        </Field>
        <FormError error={signIn.error} />
        <button type="submit" className="primary" disabled={signIn.isPending}>
          {signIn.isPending ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
