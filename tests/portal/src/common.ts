// What every portal program shares: its settings from the environment,
// checks that throw on the first surprise, `ok <step>: <what>` lines, and
// the browser the browser programs drive.

import { type Browser, chromium } from "playwright-core";

// Answers as JSON only: the list routes also stream (NDJSON, SSE) under
// `watch=true`, which a JSON client does not ask for.
export type JsonMedia = "application/json" | "application/problem+json";

export function setting(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(`set ${name}`);
  }
  return value;
}

export function check(condition: boolean, what: string): asserts condition {
  if (!condition) {
    throw new Error(`check failed: ${what}`);
  }
}

export function ok(step: string, saw: string): void {
  console.log(`ok ${step}: ${saw}`);
}

/** Debian's Chromium (`$CHROMIUM`), headless. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: setting("CHROMIUM"),
    headless: true,
    // Root in a container has no user namespaces for Chromium's sandbox.
    args: ["--no-sandbox"],
  });
}
