// Headless Chromium for the e2e tests, driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages separated by NUL bytes on the browser's file
// descriptors 3 and 4), so no npm package and no WebSocket client is needed.
//
//   const browser = await launch_chromium();          // null when no Chromium is installed
//   const page = await browser.new_page({username: 'admin', password: token});
//   await page.goto('http://127.0.0.1:9090/admin/ui');
//   const rows = await page.eval(`document.querySelectorAll('tr').length`);
//   await page.screenshot('/tmp/status.png');
//   page.errors;                                       // console errors and exceptions
//   await browser.close();
import {spawn} from 'node:child_process';
import {existsSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';

// KVGATE_CHROMIUM, else Debian's chromium (scripts/bootstrap installs it).
export const chromium_path = process.env.KVGATE_CHROMIUM ??
  ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((p) => existsSync(p));

class Connection {
  constructor(proc) {
    this.proc = proc;
    this.next_id = 1;
    this.pending = new Map();
    this.listeners = new Set();
    this.buffer = '';
    proc.stdio[4].setEncoding('utf8');
    proc.stdio[4].on('data', (chunk) => {
      this.buffer += chunk;
      let end;
      while ((end = this.buffer.indexOf('\0')) >= 0) {
        const text = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 1);
        this.dispatch(JSON.parse(text));
      }
    });
    proc.on('exit', () => {
      for (const {reject} of this.pending.values()) reject(new Error('chromium exited'));
      this.pending.clear();
    });
  }

  dispatch(message) {
    if (message.id !== undefined) {
      const p = this.pending.get(message.id);
      if (!p) return;
      this.pending.delete(message.id);
      if (message.error) p.reject(new Error(`${p.method}: ${message.error.message}`));
      else p.resolve(message.result);
      return;
    }
    for (const listener of this.listeners) listener(message);
  }

  send(method, params = {}, sessionId = undefined) {
    const id = this.next_id++;
    const message = {id, method, params};
    if (sessionId) message.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, {resolve, reject, method});
      this.proc.stdio[3].write(`${JSON.stringify(message)}\0`);
    });
  }
}

class Page {
  constructor(connection, sessionId, credentials) {
    this.c = connection;
    this.session = sessionId;
    this.credentials = credentials;
    this.errors = [];    // console errors, uncaught exceptions, failed loads
    this.messages = [];  // every console message, for a failure's report
    this.waiters = [];
    connection.listeners.add((m) => {
      if (m.sessionId !== this.session) return;
      this.on_event(m.method, m.params);
    });
  }

  on_event(method, params) {
    const send = (m, p) => this.c.send(m, p, this.session).catch(() => {});
    if (method === 'Fetch.requestPaused') {
      send('Fetch.continueRequest', {requestId: params.requestId});
    } else if (method === 'Fetch.authRequired') {
      const response = this.credentials
        ? {response: 'ProvideCredentials', ...this.credentials}
        : {response: 'CancelAuth'};
      send('Fetch.continueWithAuth', {requestId: params.requestId, authChallengeResponse: response});
    } else if (method === 'Runtime.consoleAPICalled') {
      const text = params.args.map((a) => a.value ?? a.description ?? '').join(' ');
      this.messages.push(`${params.type}: ${text}`);
      if (params.type === 'error' || params.type === 'assert') this.errors.push(`console.${params.type}: ${text}`);
    } else if (method === 'Runtime.exceptionThrown') {
      const d = params.exceptionDetails;
      this.errors.push(`exception: ${d.exception?.description ?? d.text}`);
    } else if (method === 'Log.entryAdded') {
      const e = params.entry;
      this.messages.push(`${e.level} (${e.source}): ${e.text} ${e.url ?? ''}`);
      if (e.level === 'error') this.errors.push(`${e.source}: ${e.text} ${e.url ?? ''}`);
    }
    for (const w of [...this.waiters]) {
      if (w.method === method) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(params);
      }
    }
  }

  event(method, timeout_ms = 15000) {
    return new Promise((resolve, reject) => {
      const w = {method, resolve};
      this.waiters.push(w);
      setTimeout(() => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) {
          this.waiters.splice(i, 1);
          reject(new Error(`no ${method} within ${timeout_ms} ms`));
        }
      }, timeout_ms);
    });
  }

  send(method, params = {}) {
    return this.c.send(method, params, this.session);
  }

  async goto(url) {
    const loaded = this.event('Page.loadEventFired');
    const r = await this.send('Page.navigate', {url});
    if (r.errorText) throw new Error(`navigate ${url}: ${r.errorText}`);
    await loaded;
  }

  // The value of a JavaScript expression in the page (awaited when it is a promise).
  async eval(expression) {
    const r = await this.send('Runtime.evaluate', {expression, returnByValue: true, awaitPromise: true});
    if (r.exceptionDetails) {
      throw new Error(`eval: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    }
    return r.result.value;
  }

  // Polls `expression` until it is truthy; resolves with its value.
  async wait_for(expression, timeout_ms = 15000, what = expression) {
    const deadline = Date.now() + timeout_ms;
    for (;;) {
      const v = await this.eval(expression);
      if (v) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  // A full-page PNG at `file`.
  async screenshot(file) {
    const {cssContentSize} = await this.send('Page.getLayoutMetrics');
    const r = await this.send('Page.captureScreenshot', {
      format: 'png',
      captureBeyondViewport: true,
      clip: {x: 0, y: 0, width: Math.ceil(cssContentSize.width), height: Math.ceil(cssContentSize.height), scale: 1},
    });
    writeFileSync(file, Buffer.from(r.data, 'base64'));
  }
}

class Browser {
  constructor(proc, profile) {
    this.proc = proc;
    this.profile = profile;
    this.c = new Connection(proc);
  }

  // A new tab. `credentials` ({username, password}) answer the servers' HTTP
  // authentication challenges, as a person would in the browser's login prompt.
  async new_page(credentials) {
    const {targetId} = await this.c.send('Target.createTarget', {url: 'about:blank'});
    const {sessionId} = await this.c.send('Target.attachToTarget', {targetId, flatten: true});
    const page = new Page(this.c, sessionId, credentials);
    await page.send('Page.enable');
    await page.send('Runtime.enable');
    await page.send('Log.enable');
    await page.send('Fetch.enable', {handleAuthRequests: true, patterns: [{urlPattern: '*'}]});
    await page.send('Emulation.setDeviceMetricsOverride', {width: 1400, height: 1000, deviceScaleFactor: 1, mobile: false});
    return page;
  }

  async close() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const exited = new Promise((r) => this.proc.once('exit', r));
      await this.c.send('Browser.close').catch(() => {});
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.profile, {recursive: true, force: true});
  }
}

// Starts headless Chromium with a throw-away profile; null when none is installed.
export async function launch_chromium() {
  if (!chromium_path) return null;
  const profile = mkdtempSync(path.join(tmpdir(), 'kvgate-chromium-'));
  const args = [
    '--headless', '--remote-debugging-pipe', `--user-data-dir=${profile}`,
    '--no-first-run', '--no-default-browser-check', '--disable-gpu', '--disable-extensions',
    '--disable-background-networking', '--disable-sync', '--disable-dev-shm-usage',
    '--mute-audio', '--hide-scrollbars', '--window-size=1400,1000',
  ];
  // Chromium's sandbox refuses to run as root (CI runs the tests as root).
  if (process.getuid?.() === 0) args.push('--no-sandbox');
  args.push('about:blank');
  const proc = spawn(chromium_path, args, {stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe']});
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const browser = new Browser(proc, profile);
  try {
    await Promise.race([
      browser.c.send('Browser.getVersion'),
      new Promise((_, reject) => setTimeout(() => reject(new Error(`chromium did not start: ${stderr}`)), 20000)),
    ]);
  } catch (e) {
    proc.kill('SIGKILL');
    throw e;
  }
  return browser;
}
