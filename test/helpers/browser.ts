// Debian's headless chromium driven by puppeteer-core (no bundled browser download), for the
// tests that need a real browser: the sign-in flow (sso-browser) and the UI under a sub-path (ui).
import { existsSync } from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

const CHROMIUM = process.env.KITELINE_CHROMIUM ?? '/usr/bin/chromium';

/** A headless chromium, closed at teardown; throws when Debian's chromium package is missing. */
export async function launchBrowser(t: { teardown(fn: () => unknown): void }): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no chromium at ${CHROMIUM} (Debian's chromium package)`);
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  t.teardown(() => browser.close());
  return browser;
}

/**
 * Records the page's content-security-policy refusals as the page sees them (installed before any
 * of its scripts runs); the returned function reads the directives refused so far.
 */
export async function policyViolations(page: Page): Promise<() => Promise<string[]>> {
  await page.evaluateOnNewDocument(() => {
    const scope = globalThis as unknown as {
      violations: string[];
      addEventListener(type: string, listener: (event: { violatedDirective: string }) => void): void;
    };
    scope.violations = [];
    scope.addEventListener('securitypolicyviolation', (event) => scope.violations.push(event.violatedDirective));
  });
  return () => page.evaluate(() => (globalThis as unknown as { violations: string[] }).violations);
}
