// The admin status page (GET /admin/ui, docs/gateway.md "Status page") in headless
// Chromium (Debian's `chromium`, driven over the DevTools protocol: support/chromium.mjs)
// against `kvgate serve` in front of three `kvgate engine` processes: the browser signs in
// through the Basic challenge as a person would in its login prompt, the page shows every
// endpoint, its numbers move while requests are sent through the gateway, the autoscaler
// and tenant panels fill in, and the "why here?" box shows the router's explanation of a
// prompt it has seen; the page logs no error. With KVGATE_SCREENSHOT_DIR set, a
// screenshot is saved there as status-page.png (docs/img/status-page.png is one).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bin, start_engines, start_gateway, stop_started } from './support/kvgate.mjs';
import { chromium_path, launch_chromium } from './support/chromium.mjs';

const skip = chromium_path ? false : 'no Chromium (scripts/bootstrap installs Debian\'s chromium)';
const token = 'e2e-admin-token';
const key = 'kvg-e2e-status-page-0123456789abcdef';
let base, admin, engines, browser, page, dir;

before(async () => {
  if (skip) return;
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  engines = await start_engines(3);
  dir = mkdtempSync(path.join(tmpdir(), 'kvgate-e2e-'));
  const sha = createHash('sha256').update(key).digest('hex');
  writeFileSync(path.join(dir, 'keys.yaml'), `keys:
  - sha256: ${sha}
    tenant: acme
    limits: {tokens_per_minute: 1000000, requests_per_minute: 6000}
`);
  ({ base, admin } = await start_gateway(`listeners: [{address: 127.0.0.1, port: 0}]
admin: {address: 127.0.0.1, port: 0, token: ${token}}
keys_file: keys.yaml
pools:
  main:
    scrape_interval_ms: 200
    router: {policy: kv-cost, overlap: approx}
    endpoints: [${engines.join(', ')}]
    autoscale:
      signal: waiting
      target: 2
      min_replicas: 1
      max_replicas: 4
      interval: 1s
models:
  - {name: qwen-sim, pool: main}
`, { dir, admin: true }));
  browser = await launch_chromium();
  page = await browser.new_page({ username: 'admin', password: token });
});

after(async () => {
  if (browser) await browser.close();
  await stop_started();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const prompt = (tag) => Array.from({ length: 120 }, (_, i) => `${tag}${i}`).join(' ');

async function complete(text) {
  const r = await fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'qwen-sim', prompt: text, max_tokens: 8 }),
  });
  const body = await r.text();
  assert.equal(r.status, 200, body);
  JSON.parse(body);
}

// The routed total of each endpoint row, by URL.
const routed_by_url = () => page.eval(`Object.fromEntries([...document.querySelectorAll('#endpoints tbody tr')]
  .map((tr) => [tr.querySelector('[data-field=url] span').textContent,
                Number(tr.querySelector('[data-field=routed]').textContent.split('/')[0].replace(/[^0-9]/g, ''))]))`);

test('the page refuses a client without the admin token, and serves itself to one with it', { skip }, async () => {
  let r = await fetch(`${admin}/admin/ui`);
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate'), /^Basic realm=/);
  r = await fetch(`${admin}/admin/ui`, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(await r.text(), /<title>kvgate status<\/title>/);
});

test('the status page shows every endpoint and its numbers move under load', { skip, timeout: 90000 }, async () => {
  await page.goto(`${admin}/admin/ui`);
  // Every endpoint, with the health the router gives it.
  await page.wait_for(`document.querySelectorAll('#endpoints tbody tr').length === 3`, 15000, 'three endpoint rows');
  const urls = await page.eval(`[...document.querySelectorAll('#endpoints tbody [data-field=url] span')].map((s) => s.textContent)`);
  assert.deepEqual([...urls].sort(), [...engines].sort());
  const health = await page.eval(`[...document.querySelectorAll('#endpoints tbody [data-field=health]')].map((td) => td.textContent)`);
  assert.deepEqual(health, ['healthy', 'healthy', 'healthy']);
  // Once scraped, waiting/running/KV read as numbers.
  await page.wait_for(`[...document.querySelectorAll('#endpoints tbody [data-field=scrape_age]')].every((td) => td.textContent !== 'never')`,
    15000, 'scraped endpoints');
  // Refresh every second from here on.
  await page.eval(`(() => { const s = document.getElementById('interval'); s.value = '1000'; s.dispatchEvent(new Event('change')); return true; })()`);

  const before = await routed_by_url();
  const sent = 24;
  for (let i = 0; i < sent; i += 6) {
    await Promise.all(Array.from({ length: 6 }, (_, j) => complete(prompt(`load${i + j}x`))));
  }
  // The page's own refresh shows the requests: the routed totals grow by what was sent.
  await page.wait_for(`(() => {
      const rows = [...document.querySelectorAll('#endpoints tbody tr')];
      const total = rows.reduce((n, tr) => n + Number(tr.querySelector('[data-field=routed]').textContent.split('/')[0].replace(/[^0-9]/g, '')), 0);
      return total >= ${Object.values(before).reduce((a, b) => a + b, 0) + sent};
    })()`, 15000, 'the routed totals to grow');
  const after_load = await routed_by_url();
  assert.ok(Object.keys(after_load).some((u) => after_load[u] > before[u]), JSON.stringify({ before, after_load }));
  const card = await page.eval(`Number(document.querySelector('[data-card=routed] .v').textContent.replace(/[^0-9]/g, ''))`);
  assert.ok(card >= sent, `summary card routed ${card}`);

  // The engines' own TTFT reaches the sparklines (history every 5 s).
  await page.wait_for(`[...document.querySelectorAll('#endpoints tbody [data-field=ttft] .spark-value')].some((s) => s.textContent !== '–')`,
    20000, 'a TTFT sparkline value');
  // The autoscaler's chart and its last decision.
  await page.wait_for(`!document.getElementById('autoscaler-panel').hidden && document.querySelector('#scale-chart [data-series=desired]')`,
    15000, 'the autoscaler chart');
  const reason = await page.eval(`document.querySelector('[data-fact="last decision"]').textContent`);
  assert.ok(reason.length > 1, reason);
  // The tenant's budget, used by the load.
  await page.wait_for(`(() => {
      const tr = document.querySelector('#tenants tbody tr[data-tenant=acme]');
      return tr && !/^0 \\//.test(tr.children[2].textContent);
    })()`, 15000, 'the tenant row with usage');
  assert.deepEqual(page.errors, [], page.messages.join('\n'));
});

test('the why-here box shows the router\'s explanation of a prompt', { skip, timeout: 60000 }, async () => {
  const text = prompt('why');
  await complete(text);  // routed once: the approximate index remembers where
  await page.eval(`(() => {
    document.getElementById('why-prompt').value = ${JSON.stringify(text)};
    document.getElementById('why-submit').click();
    return true;
  })()`);
  await page.wait_for(`document.querySelector('#why-table')`, 10000, 'the explanation table');
  const decision = await page.eval(`document.querySelector('#why-result [data-field=decision]').textContent`);
  assert.match(decision, /^Sent to #\d+ http:\/\/127\.0\.0\.1:\d+/);
  const rows = await page.eval(`[...document.querySelectorAll('#why-table tbody tr')].map((tr) => ({
      id: Number(tr.dataset.endpointId),
      pick: tr.classList.contains('pick'),
      matched: Number(tr.querySelector('[data-field=matched_blocks]').textContent.replace(/[^0-9]/g, '')),
      cost: tr.querySelector('[data-field=cost]').textContent,
    }))`);
  assert.equal(rows.length, 3);
  const pick = rows.filter((r) => r.pick);
  assert.equal(pick.length, 1, JSON.stringify(rows));
  // The endpoint that served the prompt holds its blocks, and the router picks it.
  assert.ok(pick[0].matched > 0, JSON.stringify(rows));
  assert.ok(rows.every((r) => r.cost !== '–'), JSON.stringify(rows));  // kv-cost costs every endpoint

  // A recent request, picked from the list (recorded since the page first looked).
  await page.wait_for(`document.querySelectorAll('#why-recent option').length > 1`, 15000, 'recent requests');
  const recent = await page.eval(`(() => {
    const s = document.getElementById('why-recent');
    s.value = s.options[1].value;
    document.getElementById('why-result').replaceChildren();
    document.getElementById('why-submit').click();
    return s.value;
  })()`);
  await page.wait_for(`document.querySelector('#why-table')`, 10000, 'the recent request\'s explanation');
  const about = await page.eval(`document.querySelector('#why-result p.muted').textContent`);
  assert.match(about, new RegExp(`request #${recent}, \\d+ s ago, was sent to http://127\\.0\\.0\\.1:\\d+`));
  await page.eval(`(() => { document.getElementById('why-recent').value = ''; return true; })()`);

  if (process.env.KVGATE_SCREENSHOT_DIR) {
    await page.screenshot(path.join(process.env.KVGATE_SCREENSHOT_DIR, 'status-page.png'));
  }
  assert.deepEqual(page.errors, [], page.messages.join('\n'));
});
