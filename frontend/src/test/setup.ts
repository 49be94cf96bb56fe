import { afterEach, expect } from "vitest";
import { cleanup } from "@testing-library/react";

// a tiny matcher instead of @testing-library/jest-dom (one dependency fewer)
expect.extend({
  toHaveAttribute(el: Element, name: string, value?: string) {
    const has = el.hasAttribute(name);
    const got = el.getAttribute(name);
    const pass = has && (value === undefined || got === value);
    return { pass, message: () => `expected ${name}=${value ?? "(any)"}, got ${has ? got : "(none)"}` };
  },
});

declare module "vitest" {
  interface Assertion {
    toHaveAttribute(name: string, value?: string): void;
  }
}

afterEach(() => cleanup());
