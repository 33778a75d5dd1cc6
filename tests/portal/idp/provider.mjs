// A real OpenID provider for the e2e tests: panva's oidc-provider on
// 127.0.0.1 with its built-in (development) login and consent pages, the
// device flow and revocation, and one public native client. It prints one
// JSON line, {"issuer":"http://127.0.0.1:PORT"}, on stdout once listening
// and nothing else there; the request log and oidc-provider's notices go to
// stderr. It exits when stdin ends (the harness holds it open) or on SIGTERM.
//
// Settings (all optional): IDP_PORT (default 0, any free port),
// IDP_CLIENT_ID (default "krayne-cli"), IDP_ID_TOKEN_TTL seconds for ID and
// access tokens (default 3600), IDP_GROUPS comma-separated (default
// "ml-research").

import { generateKeyPairSync } from "node:crypto";
import { createServer } from "node:http";

// oidc-provider prints its notices with console.info, which is stdout; the
// harness reads stdout for the issuer line only.
console.info = console.error;
console.log = console.error;

const { default: Provider } = await import("oidc-provider");

const clientId = process.env.IDP_CLIENT_ID || "krayne-cli";
const tokenTtl = Number(process.env.IDP_ID_TOKEN_TTL || 3600);
const groups = (process.env.IDP_GROUPS ?? "ml-research")
  .split(",")
  .map((g) => g.trim())
  .filter(Boolean);
if (!Number.isInteger(tokenTtl) || tokenTtl <= 0) {
  throw new Error(`IDP_ID_TOKEN_TTL must be a positive number of seconds: ${process.env.IDP_ID_TOKEN_TTL}`);
}

// A fresh signing key per run (RS256, what every relying party verifies),
// rather than oidc-provider's well-known development key.
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: "jwk" }), kid: "krayne-test", alg: "RS256", use: "sig" };

const server = createServer();
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(Number(process.env.IDP_PORT || 0), "127.0.0.1", resolve);
});
// The issuer is known only once the port is, so the provider comes second.
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      application_type: "native",
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
      response_types: ["code"],
      // A native client's loopback redirect matches on any port (RFC 8252
      // §7.3); oidc-provider does this itself for application_type native.
      redirect_uris: ["http://127.0.0.1/callback"],
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: ["krayne-test-idp-cookie-key"] },
  features: {
    devInteractions: { enabled: true },
    deviceFlow: { enabled: true },
    revocation: { enabled: true },
  },
  // oidc-provider 9 supports S256 only; this makes PKCE mandatory for every
  // client, not just public ones as by default.
  pkce: { required: () => true },
  // Without this a refresh token needs offline_access and, in the code flow,
  // prompt=consent; the CLI should get one however it asks.
  issueRefreshToken: async () => true,
  // Scope claims (email, groups) go into the ID token of the code flow too.
  conformIdTokenClaims: false,
  scopes: ["openid", "offline_access", "email", "profile", "groups"],
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["name"],
    groups: ["groups"],
  },
  ttl: {
    IdToken: tokenTtl,
    AccessToken: tokenTtl,
    RefreshToken: 24 * 60 * 60,
    DeviceCode: 600,
  },
  // Any login name is an account.
  findAccount: async (_ctx, id) => ({
    accountId: id,
    claims: async () => ({
      sub: id,
      email: `${id}@example.com`,
      email_verified: true,
      name: id,
      groups,
    }),
  }),
});

provider.on("server_error", (_ctx, err) => console.error("server_error:", err));

const handle = provider.callback();
server.on("request", (req, res) => {
  res.on("finish", () => {
    const path = (req.url ?? "").split("?")[0];
    console.error(`${req.method} ${path} ${res.statusCode}`);
  });
  handle(req, res);
});

process.stdout.write(`${JSON.stringify({ issuer })}\n`);

function shutdown() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
process.stdin.on("end", shutdown);
process.stdin.on("close", shutdown);
process.stdin.resume();
