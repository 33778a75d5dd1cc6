// Signs in at the test OpenID provider (idp/provider.mjs) as a person would,
// in Debian's Chromium: `node idp/sign-in.mjs URL LOGIN` opens URL (an
// authorization request, or the device flow's verification_uri[_complete])
// and walks whatever pages come: the user code (USER_CODE when the page does
// not have it already), its confirmation, the login (LOGIN, any password),
// the consent, and then either the loopback redirect to the program under
// test (its page is printed) or the device flow's success page.
// Pages are told apart by their form fields, not their wording. Each step
// prints `ok <step>: <what it saw>`; any surprise (an error page, no
// progress within 30 s) prints the page's URL and text to stderr, exit 1.

import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { chromium } from "playwright-core";

const STEP_TIMEOUT_MS = 30_000;
const MAX_STEPS = 20;

const [startUrl, login] = process.argv.slice(2);
if (!startUrl || !login) {
  console.error("usage: node idp/sign-in.mjs URL LOGIN   (env: CHROMIUM, USER_CODE)");
  process.exit(2);
}
const providerOrigin = new URL(startUrl).origin;

class Surprise extends Error {}

function ok(step, saw) {
  console.log(`ok ${step}: ${saw}`);
}

function chromiumPath() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir || ".", "chromium");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error("no chromium on PATH; set CHROMIUM");
}

function isLoopback(url) {
  const { hostname } = new URL(url);
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

const oneLine = (text, max = 240) => {
  const flat = (text ?? "").replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
};

// The page's text without its heading, which the ok lines print already.
const body = (seen) => (seen.heading ? seen.text.replace(seen.heading, "") : seen.text);

// What the page is, read from its forms: each form's visible fields, hidden
// field names and submit buttons (including those outside the form that
// name it with form=). The chosen button gets a data attribute to click.
function describePage() {
  const visible = (el) => {
    const style = getComputedStyle(el);
    return el.getClientRects().length > 0 && style.visibility !== "hidden" && style.display !== "none";
  };
  const forms = [...document.forms].map((form, index) => {
    const elements = [...form.elements];
    const fields = elements.filter((el) => el.tagName === "INPUT" && el.type !== "hidden" && el.type !== "submit");
    const hidden = Object.fromEntries(
      elements.filter((el) => el.tagName === "INPUT" && el.type === "hidden").map((el) => [el.name, el.value]),
    );
    const buttons = elements.filter(
      (el) => (el.tagName === "BUTTON" && el.type === "submit") || (el.tagName === "INPUT" && el.type === "submit"),
    );
    return {
      index,
      visibleFields: fields.filter(visible).map((el) => ({ name: el.name, type: el.type, value: el.value })),
      hidden,
      buttons: buttons.map((el) => ({ name: el.name, text: (el.innerText || el.value || "").trim(), visible: visible(el) })),
    };
  });
  // An error page from oidc-provider lists `error: ...` lines; its device
  // pages flag a rejected code in red.
  const errorLines = [...document.querySelectorAll("pre")].map((el) => el.innerText).filter((t) => /^\s*error\b/.test(t));
  const warning = [...document.querySelectorAll(".red")].map((el) => el.innerText).join(" ");
  return {
    title: document.title,
    heading: document.querySelector("h1")?.innerText ?? "",
    text: document.body?.innerText ?? "",
    forms,
    errorLines,
    warning,
  };
}

async function main() {
  const browser = await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    // Root in a container has no user namespaces for Chromium's sandbox.
    args: ["--no-sandbox"],
  });
  let page;
  try {
    const context = await browser.newContext();
    // Only loopback is reachable here: the provider's stock pages @import a
    // web font, which must not leave the machine.
    await context.route("**/*", (route) =>
      isLoopback(route.request().url()) ? route.continue() : route.abort("blockedbyclient"),
    );
    page = await context.newPage();

    // Every main-frame navigation counts as progress; the last document's
    // status (redirects aside) tells the provider's error pages apart.
    let navigations = 0;
    let lastStatus = 0;
    page.on("framenavigated", (frame) => {
      if (frame === page.mainFrame()) navigations += 1;
    });
    // A page that could not load at all (nobody listening on the redirect's
    // port) shows as Chromium's own error page; say which URL failed.
    let failedNavigation;
    page.on("requestfailed", (request) => {
      if (request.isNavigationRequest() && request.frame() === page.mainFrame()) {
        failedNavigation = `${request.url()} (${request.failure()?.errorText})`;
      }
    });
    page.on("response", (response) => {
      const request = response.request();
      const redirect = response.status() >= 300 && response.status() < 400;
      if (request.isNavigationRequest() && request.frame() === page.mainFrame() && !redirect) {
        lastStatus = response.status();
      }
    });
    const waitForProgress = async (since, what) => {
      const deadline = Date.now() + STEP_TIMEOUT_MS;
      while (navigations <= since) {
        if (Date.now() > deadline) throw new Surprise(`no progress within ${STEP_TIMEOUT_MS / 1000} s after ${what}`);
        await page.waitForTimeout(50);
      }
      await page.waitForLoadState("load", { timeout: STEP_TIMEOUT_MS });
    };

    await page.goto(startUrl, { timeout: STEP_TIMEOUT_MS }).catch((err) => {
      if (failedNavigation) throw new Surprise(`could not load ${failedNavigation}`);
      throw err;
    });
    ok("opened", `${page.url()} (${lastStatus})`);

    // Submits a form by clicking its submit button (never one named abort)
    // and waits for the next page.
    const submit = async (form, step) => {
      const since = navigations;
      await page.evaluate(
        (index) => {
          const buttons = [...document.forms[index].elements].filter(
            (el) => el.type === "submit" && el.name !== "abort",
          );
          const button = buttons.find((el) => el.getClientRects().length > 0) ?? buttons[0];
          if (button) button.setAttribute("data-sign-in-pick", "");
        },
        form.index,
      );
      const picked = page.locator("[data-sign-in-pick]");
      if ((await picked.count()) > 0) {
        await picked.first().click();
      } else {
        // No button at all: submit as a script would.
        await page.evaluate((index) => document.forms[index].requestSubmit(), form.index);
      }
      await waitForProgress(since, step);
    };

    for (let step = 0; step < MAX_STEPS; step += 1) {
      await page.waitForLoadState("load", { timeout: STEP_TIMEOUT_MS });
      const since = navigations;
      const url = page.url();
      if (failedNavigation) throw new Surprise(`could not load ${failedNavigation}`);
      let seen;
      try {
        seen = await page.evaluate(describePage);
      } catch (err) {
        // The page moved on while being read (an auto-submitting form).
        if (navigations > since) continue;
        throw err;
      }

      // Left the provider: the redirect to the program under test.
      if (new URL(url).origin !== providerOrigin) {
        const params = new URL(url).searchParams;
        if (!isLoopback(url)) throw new Surprise(`redirected off loopback to ${url}`);
        if (params.has("error")) throw new Surprise(`redirected with error=${params.get("error")}: ${params.get("error_description") ?? ""}`);
        if (lastStatus >= 400) throw new Surprise(`the callback answered ${lastStatus}`);
        ok("redirect", `${new URL(url).origin}${new URL(url).pathname} with ${[...params.keys()].join(", ")}`);
        ok("callback page", `${seen.title}: ${oneLine(seen.text)}`);
        return;
      }

      if (seen.errorLines.length > 0 || lastStatus >= 400) {
        throw new Surprise(`the provider answered ${lastStatus}: ${oneLine(seen.errorLines.join(" ") || seen.text)}`);
      }
      if (seen.warning) throw new Surprise(`the provider refused: ${oneLine(seen.warning)}`);

      const byField = (name) => seen.forms.find((f) => f.visibleFields.some((field) => field.name === name));
      const loginForm = seen.forms.find(
        (f) => f.visibleFields.some((field) => field.type === "password") && f.visibleFields.some((field) => field.type === "text" || field.type === "email"),
      );
      const codeForm = byField("user_code");
      const confirmForm = seen.forms.find((f) => "confirm" in f.hidden && "user_code" in f.hidden);
      const actionable = seen.forms.filter((f) => f.buttons.some((b) => b.visible && b.name !== "abort"));

      if (codeForm) {
        const field = codeForm.visibleFields.find((f) => f.name === "user_code");
        const input = page.locator("form").nth(codeForm.index).locator('input[name="user_code"]');
        if (!field.value) {
          const code = process.env.USER_CODE;
          if (!code) throw new Surprise("the page asks for the user code and USER_CODE is not set");
          await input.fill(code);
        }
        ok("user code", `${seen.heading}: entered ${await input.inputValue()}`);
        await submit(codeForm, "the user code");
      } else if (confirmForm) {
        ok("confirm code", `${seen.heading}: ${confirmForm.hidden.user_code}`);
        await submit(confirmForm, "confirming the code");
      } else if (loginForm) {
        const form = page.locator("form").nth(loginForm.index);
        const name = loginForm.visibleFields.find((f) => f.type === "text" || f.type === "email").name;
        await form.locator(`input[name="${name}"]`).fill(login);
        await form.locator('input[type="password"]').fill("any password");
        ok("login", `${seen.heading}: ${login}`);
        await submit(loginForm, "the login");
      } else if (actionable.length > 0) {
        // A form with nothing to fill but a button: the consent.
        ok("consent", `${seen.heading}: ${oneLine(body(seen).replace(/\(Click to expand\).*$/s, ""))}`);
        await submit(actionable[0], "the consent");
      } else if (seen.forms.length > 0) {
        // Only hidden fields: a form that posts itself (form_post).
        await waitForProgress(since, "an auto-submitting form");
      } else {
        // A provider page with nothing to do: the device flow's success.
        ok("done", `${seen.heading || seen.title}: ${oneLine(body(seen))}`);
        return;
      }
    }
    throw new Surprise(`still not done after ${MAX_STEPS} pages`);
  } catch (err) {
    let where = "(no page)";
    let text = "";
    if (page) {
      where = page.url();
      text = await page.evaluate(() => document.body?.innerText ?? "").catch(() => "");
    }
    console.error(`sign-in failed: ${err instanceof Surprise ? err.message : err.stack}`);
    console.error(`at ${where}`);
    if (text) console.error(text);
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

await main();
