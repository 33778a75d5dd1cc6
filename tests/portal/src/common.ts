// What every portal program shares: its settings from the environment,
// checks that throw on the first surprise, and `ok <step>: <what>` lines.

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
