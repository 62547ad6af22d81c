// Debian's headless chromium driven by puppeteer-core (no bundled browser download), for the
// tests that need a real browser: the sign-in flow (sso-browser) and the UI under a sub-path (ui).
import { existsSync } from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';

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
