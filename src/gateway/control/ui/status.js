// kvgate's status page: reads the admin API (docs/gateway.md, "Admin API") and draws it.
// Plain JavaScript, no framework and no build step; embedded in the binary with
// status.html and status.css.
//
// Cost to the gateway: nothing while nobody looks (no request is made while the tab is
// hidden or the refresh paused); per refresh, one page of one pool's endpoints (at most
// 100 rows, their TTFT/ITL history every few seconds only) and the small sections that
// pool has (autoscaler, queue), the warm-up and tenants.
//
// Auth: the browser's own (the admin API answers the page's first load with a Basic
// challenge; the token is the password and the browser sends it on every call made
// here), or a token typed into the page's field, kept in sessionStorage and sent as
// `Authorization: Bearer`.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const SVG = 'http://www.w3.org/2000/svg';
  const TOKEN_KEY = 'kvgate-admin-token';
  const HISTORY_EVERY_MS = 5000;  // sparklines: the server's step; no need to ask faster

  const state = {
    index: null,          // GET /admin
    pool: null,           // the pool shown
    offset: 0,
    pageSize: 25,
    health: '',
    timer: null,
    inFlight: false,
    lastHistoryAt: 0,
    history: new Map(),   // endpoint id -> {ttft_ms, itl_ms} (last fetched)
    poolHistory: null,    // the pool's {ttft_ms, itl_ms, step_s} (last fetched)
    recentLoadedAt: 0,
    tenantsAt: 0,
  };

  // ---- the admin API -------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, options = {}) {
    const headers = {...(options.headers || {})};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    // location.origin, not a relative URL: a page opened as http://user:token@host/...
    // must not put those credentials into fetch()'s URL (it refuses them).
    const url = new URL(path, location.origin);
    const r = await fetch(url, {...options, headers, cache: 'no-store', credentials: 'same-origin'});
    if (r.status === 401) {
      showAuth();
      throw new ApiError(401, 'The admin token is missing or wrong.');
    }
    let body = null;
    const text = await r.text();
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      throw new ApiError(r.status, `${path}: not JSON (${r.status})`);
    }
    if (!r.ok) {
      const message = body && body.error ? body.error.message : `${r.status}`;
      throw new ApiError(r.status, `${path}: ${message}`);
    }
    return body;
  }

  const enc = encodeURIComponent;
  const poolPath = (pool, rest) => `/admin/pools/${enc(pool)}${rest}`;

  // ---- small DOM helpers -------------------------------------------------------------------

  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('data-')) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function svg(tag, attrs = {}) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  }

  function fmt(n, digits = 0) {
    if (n === null || n === undefined || Number.isNaN(n)) return '–';
    if (typeof n !== 'number') return String(n);
    return n.toLocaleString(undefined, {maximumFractionDigits: digits, minimumFractionDigits: 0});
  }

  function ms(v) {
    if (v === null || v === undefined) return '–';
    return v >= 1000 ? `${fmt(v / 1000, 2)} s` : `${fmt(v, v < 10 ? 2 : 0)} ms`;
  }

  function tag(text, cls) {
    return el('span', {class: `tag ${cls || text}`, text});
  }

  function meter(fraction, hot) {
    const m = el('span', {class: hot ? 'meter hot' : 'meter', title: `${fmt(fraction * 100, 1)} %`});
    const fill = el('span');
    fill.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`;
    m.append(fill);
    return m;
  }

  // A sparkline of `values` (nulls leave gaps), newest last, and the newest value.
  function sparkline(values, field) {
    const wrap = el('span', {'data-field': field});
    const s = svg('svg', {class: 'spark', viewBox: '0 0 80 18', preserveAspectRatio: 'none'});
    const vals = values || [];
    const finite = vals.filter((v) => v !== null && v !== undefined);
    const max = finite.length ? Math.max(...finite) : 0;
    if (finite.length && vals.length > 1) {
      const step = 80 / (vals.length - 1);
      let run = [];
      const flush = () => {
        if (run.length === 1) run.push(`${Number(run[0].split(',')[0]) + 1},${run[0].split(',')[1]}`);
        if (run.length > 1) s.append(svg('polyline', {points: run.join(' ')}));
        run = [];
      };
      vals.forEach((v, i) => {
        if (v === null || v === undefined) return flush();
        const y = max > 0 ? 17 - (v / max) * 16 : 17;
        run.push(`${(i * step).toFixed(1)},${y.toFixed(1)}`);
      });
      flush();
    }
    let last = null;
    for (let i = vals.length - 1; i >= 0; i--) {
      if (vals[i] !== null && vals[i] !== undefined) { last = vals[i]; break; }
    }
    wrap.append(s, el('span', {class: 'spark-value', text: ms(last)}));
    return wrap;
  }

  function showError(message) {
    const e = $('error');
    if (!message) {
      e.hidden = true;
      e.textContent = '';
      return;
    }
    e.hidden = false;
    e.textContent = message;
  }

  function showAuth() {
    $('auth').hidden = false;
  }

  // ---- the pools ----------------------------------------------------------------------------

  function poolSections(pool) {
    const by = state.index && state.index.pool_sections_by_pool;
    return (by && by[pool]) || [];
  }

  function renderPools() {
    const nav = $('pools');
    nav.replaceChildren();
    for (const name of state.index.pools) {
      const b = el('button', {type: 'button', text: name, 'data-pool': name});
      b.setAttribute('aria-current', String(name === state.pool));
      b.addEventListener('click', () => {
        if (state.pool === name) return;
        location.hash = `#pool=${enc(name)}`;
      });
      nav.append(b);
    }
  }

  function poolFromHash() {
    const m = /pool=([^&]+)/.exec(location.hash);
    const want = m ? decodeURIComponent(m[1]) : null;
    const pools = state.index ? state.index.pools : [];
    return pools.includes(want) ? want : pools[0] || null;
  }

  function selectPool(name) {
    if (state.pool === name) return;
    state.pool = name;
    state.offset = 0;
    state.history.clear();
    state.poolHistory = null;
    state.lastHistoryAt = 0;
    state.recentLoadedAt = 0;
    $('why-result').replaceChildren();
    renderPools();
  }

  // ---- summary cards ----------------------------------------------------------------------

  function card(key, value, cls) {
    return el('div', {class: 'card', 'data-card': key},
      el('div', {class: `v ${cls || ''}`, text: value}), el('div', {class: 'k', text: key}));
  }

  function renderSummary(list) {
    const s = list.summary;
    const cards = [
      card('endpoints', fmt(s.endpoints)),
      card('healthy', fmt(s.healthy), s.healthy === s.endpoints ? 'ok' : 'warn'),
      card('unhealthy', fmt(s.unhealthy), s.unhealthy ? 'bad' : ''),
      card('draining', fmt(s.draining + s.standby), s.draining ? 'warn' : ''),
      card('breakers open', fmt(s.breakers_open), s.breakers_open ? 'bad' : ''),
      card('in flight', fmt(s.in_flight)),
      card('waiting', fmt(s.waiting)),
      card('running', fmt(s.running)),
      card('KV mean', s.kv_usage_mean === null ? '–' : `${fmt(s.kv_usage_mean * 100, 1)} %`),
      card('routed', fmt(s.routed_total)),
      card('failed', fmt(s.failed_total), s.failed_total ? 'warn' : ''),
    ];
    const h = state.poolHistory;
    if (h) {
      for (const [key, label] of [['ttft_ms', 'TTFT'], ['itl_ms', 'ITL']]) {
        cards.push(el('div', {class: 'card', 'data-card': label},
          el('div', {class: 'v'}, sparkline(h[key], label.toLowerCase())),
          el('div', {class: 'k', text: `${label}, last ${Math.round((h[key].length * h.step_s) / 60)} min`})));
      }
    }
    $('summary').replaceChildren(...cards);
  }

  // ---- endpoints table ---------------------------------------------------------------------

  function cell(field, content, cls) {
    const td = el('td', {class: cls, 'data-field': field});
    if (content instanceof Node) td.append(content);
    else td.textContent = content;
    return td;
  }

  function endpointRow(e) {
    const m = e.metrics;
    const eff = e.effective_load || {};
    const kv = m ? m.kv_usage : null;
    const h = state.history.get(e.id) || e.history;
    const breaker = e.breaker.state === 'open'
      ? tag(`open ${fmt(e.breaker.open_for_ms / 1000, 0)} s`, 'open')
      : el('span', {class: e.breaker.consecutive_failures ? 'warn' : 'muted',
        text: e.breaker.consecutive_failures ? `${e.breaker.consecutive_failures} failed` : 'closed'});
    const tr = el('tr', {'data-endpoint-id': String(e.id)},
      cell('id', String(e.id), 'num'),
      cell('url', el('span', {class: 'url', title: `${e.url} (${e.source})`, text: e.url})),
      cell('role', e.role),
      cell('health', tag(e.health)),
      cell('breaker', breaker),
      cell('waiting', m ? fmt(m.waiting) : '–', 'num'),
      cell('running', m ? fmt(m.running) : '–', 'num'),
      cell('kv_usage', kv === null ? '–' : el('span', {}, meter(kv, eff.saturated), ` ${fmt(kv * 100, 0)}%`)),
      cell('precise_blocks', e.kv_events || e.cache.precise_blocks ? fmt(e.cache.precise_blocks) : '–', 'num'),
      cell('approx_blocks', fmt(e.cache.approx_blocks), 'num'),
      cell('in_flight', fmt(e.load.in_flight), 'num'),
      cell('routed', `${fmt(e.load.routed_total)}${e.load.failed_total ? ` / ${fmt(e.load.failed_total)}` : ''}`, 'num'),
      cell('ttft', sparkline(h && h.ttft_ms, 'ttft')),
      cell('itl', sparkline(h && h.itl_ms, 'itl')),
      cell('scrape_age', m ? ms(m.age_ms) : 'never', m && eff.stale ? 'num bad' : 'num'));
    return tr;
  }

  function renderEndpoints(list) {
    const rows = list.endpoints.map(endpointRow);
    $('endpoints').tBodies[0].replaceChildren(...rows);
    const total = list.total;
    const first = total ? state.offset + 1 : 0;
    const last = state.offset + list.endpoints.length;
    $('ep-range').textContent = `${fmt(first)}–${fmt(last)} of ${fmt(total)}`;
    const pages = Math.max(1, Math.ceil(total / state.pageSize));
    $('page-label').textContent = `page ${Math.floor(state.offset / state.pageSize) + 1} / ${pages}`;
    $('page-prev').disabled = state.offset === 0;
    $('page-next').disabled = last >= total;
  }

  async function loadEndpoints() {
    const now = Date.now();
    const withHistory = now - state.lastHistoryAt >= HISTORY_EVERY_MS;
    let q = `?offset=${state.offset}&limit=${state.pageSize}`;
    if (state.health) q += `&health=${enc(state.health)}`;
    if (withHistory) q += '&history=1';
    const list = await api(poolPath(state.pool, `/endpoints${q}`));
    if (list.total > 0 && state.offset >= list.total) {
      // The page went away (endpoints removed, filter changed): back to the last one.
      state.offset = Math.max(0, Math.floor((list.total - 1) / state.pageSize) * state.pageSize);
      return loadEndpoints();
    }
    if (withHistory) {
      state.lastHistoryAt = now;
      state.history.clear();
      for (const e of list.endpoints) if (e.history) state.history.set(e.id, e.history);
      if (list.history) state.poolHistory = list.history;
    }
    renderSummary(list);
    renderEndpoints(list);
  }

  // ---- autoscaler -------------------------------------------------------------------------

  const SERIES = [
    ['desired', 'desired'],
    ['ready', 'ready'],
    ['starting', 'starting'],
    ['draining', 'draining'],
    ['current', 'current'],
  ];

  function renderScaleChart(history) {
    const chart = $('scale-chart');
    chart.replaceChildren();
    const W = 480, H = 150, L = 28, B = 18, T = 6, R = 6;
    const n = history ? history.desired.length : 0;
    let max = 1;
    for (const [key] of SERIES) {
      for (const v of (history && history[key]) || []) if (v !== null && v > max) max = v;
    }
    max = Math.ceil(max * 1.1);
    const x = (i) => L + (n > 1 ? (i / (n - 1)) * (W - L - R) : 0);
    const y = (v) => H - B - (v / max) * (H - B - T);
    chart.append(svg('line', {class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B}));
    chart.append(svg('line', {class: 'axis', x1: L, y1: T, x2: L, y2: H - B}));
    for (const v of [0, Math.round(max / 2), max]) {
      const t = svg('text', {x: L - 4, y: y(v) + 3, 'text-anchor': 'end'});
      t.textContent = String(v);
      chart.append(t);
    }
    const span = history ? (n * history.step_s) / 60 : 60;
    for (const [frac, label] of [[0, `-${Math.round(span)} min`], [0.5, `-${Math.round(span / 2)} min`], [1, 'now']]) {
      const t = svg('text', {x: L + frac * (W - L - R), y: H - 4, 'text-anchor': frac === 0 ? 'start' : frac === 1 ? 'end' : 'middle'});
      t.textContent = label;
      chart.append(t);
    }
    if (!history) return;
    SERIES.forEach(([key], k) => {
      const vals = history[key] || [];
      let run = [];
      const flush = () => {
        if (run.length > 1) chart.append(svg('polyline', {class: `s${k}`, points: run.join(' '), 'data-series': key}));
        run = [];
      };
      vals.forEach((v, i) => {
        if (v === null || v === undefined) return flush();
        // Steps: the count holds until the next sample.
        if (run.length) run.push(`${x(i).toFixed(1)},${run[run.length - 1].split(',')[1]}`);
        run.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`);
      });
      flush();
    });
  }

  function renderAutoscaler(a) {
    const panel = $('autoscaler-panel');
    if (!a) {
      panel.hidden = true;
      return;
    }
    panel.hidden = false;
    renderScaleChart(a.history);
    const legend = SERIES.map(([key, label], k) => el('span', {}, el('i', {class: `s${k}`}), label));
    $('scale-legend').replaceChildren(...legend);
    const sig = a.signals || {};
    const facts = [
      ['desired', `${a.desired_replicas} (bounds ${a.min_replicas}..${a.max_replicas})`],
      ['current', `${a.current_replicas}: ${fmt(sig.ready)} ready, ${fmt(sig.starting)} starting`],
      ['last decision', a.reason || '–'],
      ['limited by', a.limited_by || '–'],
      ['panic', a.panic ? 'yes' : 'no'],
      ['decisions', fmt(a.decisions)],
      ['signals', `waiting ${fmt(sig.waiting)}, running ${fmt(sig.running)}, KV ${fmt((sig.kv_usage || 0) * 100, 1)} %`],
      ['TTFT p50 / p90', sig.ttft ? `${ms(sig.ttft.p50 * 1000)} / ${ms(sig.ttft.p90 * 1000)}` : '–'],
      ['ITL p50 / p90', sig.itl ? `${ms(sig.itl.p50 * 1000)} / ${ms(sig.itl.p90 * 1000)}` : '–'],
    ];
    if (a.acted === false) facts.push(['acting', 'no: another gateway replica leads this pool']);
    $('scale-info').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', {text: k}), el('dd', {'data-fact': k, text: v})]));
  }

  // ---- warm-up, queue, tenants --------------------------------------------------------------

  function renderWarmup(w) {
    const panel = $('warmup-panel');
    const pool = w && w.pools.find((p) => p.pool === state.pool);
    if (!pool || !pool.enabled) {
      panel.hidden = true;
      return;
    }
    panel.hidden = false;
    const running = pool.runs.filter((r) => r.running);
    const recent = pool.runs.slice(-5).reverse();
    const rows = recent.map((r) => el('tr', {},
      el('td', {class: 'url', text: r.url}),
      el('td', {}, tag(r.running ? 'running' : r.state, r.running ? 'warn' : r.state === 'ready' ? 'ok' : 'muted')),
      el('td', {class: 'num', text: `${fmt(r.succeeded)}/${fmt(r.planned)}`}),
      el('td', {class: 'num', text: `${fmt(r.tokens_warmed)} tokens`}),
      el('td', {class: 'num', text: `${fmt(r.duration_s, 1)} s`})));
    $('warmup').replaceChildren(
      el('p', {}, `${running.length} in progress; ${fmt(pool.tracked_prefixes)} prefixes tracked (${fmt(pool.stored_tokens)} tokens).`),
      rows.length ? el('table', {}, el('tbody', {}, ...rows)) : el('p', {class: 'muted', text: 'No warm-up yet.'}));
  }

  function renderQueue(q) {
    const panel = $('queue-panel');
    if (!q) {
      panel.hidden = true;
      return;
    }
    panel.hidden = false;
    const bands = Object.entries(q.bands).map(([b, v]) => `${b} ${fmt(v.queued)}`).join(', ');
    const head = (q.head || []).slice(0, 10).map((h) => el('tr', {},
      el('td', {text: h.band}), el('td', {text: h.tenant}), el('td', {class: 'num', text: `${fmt(h.waited_s, 1)} s`})));
    $('queue').replaceChildren(
      el('p', {'data-field': 'queued'}, `${fmt(q.queued)} queued (${fmt(q.queued_tokens)} tokens): ${bands}`),
      head.length ? el('table', {}, el('thead', {}, el('tr', {}, el('th', {text: 'band'}), el('th', {text: 'tenant'}), el('th', {class: 'num', text: 'waited'}))), el('tbody', {}, ...head))
        : el('p', {class: 'muted', text: 'Nothing waits.'}));
  }

  function renderTenants(t) {
    const panel = $('tenants-panel');
    if (!t || !t.tenants.length) {
      panel.hidden = true;
      return;
    }
    panel.hidden = false;
    const rows = [];
    for (const tenant of t.tenants) {
      tenant.rules.forEach((r, i) => {
        const fraction = r.limit > 0 ? r.used / r.limit : 0;
        rows.push(el('tr', {'data-tenant': tenant.tenant},
          el('td', {text: i === 0 ? tenant.tenant : ''}),
          el('td', {text: r.rule}),
          el('td', {class: 'num', text: `${fmt(r.used)} / ${fmt(r.limit)}`}),
          el('td', {}, meter(fraction, fraction >= 0.9))));
      });
      if (!tenant.rules.length) {
        rows.push(el('tr', {'data-tenant': tenant.tenant}, el('td', {text: tenant.tenant}),
          el('td', {class: 'muted', text: 'no limits'}), el('td'), el('td')));
      }
    }
    $('tenants').tBodies[0].replaceChildren(...rows);
  }

  // ---- why here -----------------------------------------------------------------------------

  // Reading the list is what makes the pool record its next requests (for a minute):
  // nothing is recorded while nobody looks.
  async function loadRecent() {
    const r = await api(poolPath(state.pool, '/recent'));
    const select = $('why-recent');
    const keep = select.value;
    const options = [el('option', {value: '', text: '—'})];
    for (const q of r.requests) {
      options.push(el('option', {value: String(q.id),
        text: `#${q.id} ${fmt(q.age_s, 0)} s ago: ${fmt(q.prompt_tokens)} tokens → ${q.accepted ? q.url : q.reason}`}));
    }
    select.replaceChildren(...options);
    if ([...select.options].some((o) => o.value === keep)) select.value = keep;
  }

  function renderWhy(x) {
    const d = x.decision;
    const out = [];
    const head = el('p', {class: 'decision', 'data-field': 'decision'});
    if (d.accepted) {
      head.append('Sent to ', el('strong', {'data-field': 'pick', text: `#${d.endpoint} ${d.url}`}),
        `: ${fmt(d.matched_blocks)} of ${fmt(x.prompt_blocks)} blocks matched (${fmt(d.cached_blocks)} cached), `,
        `${fmt(d.prefill_tokens)} tokens to prefill (${ms(d.predicted_prefill_ms)}), cost ${fmt(d.cost, 2)}`);
      if (d.prefill_endpoint !== null && d.prefill_endpoint !== undefined) head.append(`; prefill on #${d.prefill_endpoint}`);
    } else {
      head.append('Refused: ', el('strong', {text: d.reason}), ` (HTTP ${d.http_status})`);
    }
    out.push(head);
    out.push(el('p', {class: 'muted'},
      `${fmt(x.prompt_tokens)} prompt tokens, ${fmt(x.prompt_blocks)} blocks of ${x.block_size}; policy ${x.policy}, overlap from the ${x.overlap} index` +
      (x.recent ? `; request #${x.recent.id}, ${fmt(x.recent.age_s, 0)} s ago, was sent to ${x.recent.url || 'nowhere'} (explained as the pool is now)` : '') +
      (x.engine_tokenize ? `; ids: ${x.engine_tokenize}` : '')));
    // The scored first (lowest cost first), then the rest by matched blocks; at most 25.
    const eps = [...x.endpoints].sort((a, b) => {
      const ca = a.cost ?? Infinity, cb = b.cost ?? Infinity;
      if (ca !== cb) return ca - cb;
      return b.matched_blocks - a.matched_blocks || a.id - b.id;
    });
    const shown = eps.slice(0, 25);
    if (d.accepted && !shown.some((e) => e.id === d.endpoint)) {
      const pick = eps.find((e) => e.id === d.endpoint);
      if (pick) shown.push(pick);
    }
    const termNames = [];
    for (const e of shown) for (const k of Object.keys(e.terms || {})) if (!termNames.includes(k)) termNames.push(k);
    const headRow = el('tr', {},
      ...['id', 'url', 'health', 'matched', 'cached', 'active prefix', 'waiting', 'running', 'KV', 'saturation']
        .map((t) => el('th', {text: t})),
      ...termNames.map((t) => el('th', {class: 'num', text: t})),
      el('th', {class: 'num', text: 'cost'}), el('th', {class: 'num', text: 'decode cost'}));
    const rows = shown.map((e) => {
      const l = e.effective_load || {};
      const pick = d.accepted && (e.id === d.endpoint || e.id === d.prefill_endpoint);
      return el('tr', {class: pick ? 'pick' : '', 'data-endpoint-id': String(e.id)},
        el('td', {class: 'num', text: String(e.id)}),
        el('td', {class: 'url', text: e.url}),
        el('td', {}, tag(e.health)),
        el('td', {class: 'num', 'data-field': 'matched_blocks', text: fmt(e.matched_blocks)}),
        el('td', {class: 'num', text: fmt(e.cached_blocks)}),
        el('td', {class: 'num', text: fmt(e.active_prefix_blocks)}),
        el('td', {class: 'num', text: fmt(l.waiting, 1)}),
        el('td', {class: 'num', text: fmt(l.running, 1)}),
        el('td', {class: 'num', text: l.kv_usage === null || l.kv_usage === undefined ? '–' : `${fmt(l.kv_usage * 100, 0)}%`}),
        el('td', {class: 'num', text: l.saturation === null || l.saturation === undefined ? 'stale' : fmt(l.saturation, 2)}),
        ...termNames.map((t) => el('td', {class: 'num terms', text: fmt((e.terms || {})[t], 2)})),
        el('td', {class: 'num', 'data-field': 'cost', text: fmt(e.cost, 2)}),
        el('td', {class: 'num', text: fmt(e.decode_cost, 2)}));
    });
    out.push(el('div', {class: 'scroll'}, el('table', {id: 'why-table'}, el('thead', {}, headRow), el('tbody', {}, ...rows))));
    if (eps.length > shown.length) out.push(el('p', {class: 'muted', text: `${eps.length - shown.length} more endpoints not shown.`}));
    $('why-result').replaceChildren(...out);
  }

  async function explain(event) {
    event.preventDefault();
    if (!state.pool) return;
    const recent = $('why-recent').value;
    const text = $('why-prompt').value;
    const maxTokens = Number($('why-max-tokens').value) || 64;
    let body;
    if (recent) body = {recent_id: Number(recent)};
    else if ($('why-kind').value === 'chat') body = {messages: [{role: 'user', content: text}], max_tokens: maxTokens};
    else body = {prompt: text, max_tokens: maxTokens};
    $('why-submit').disabled = true;
    try {
      const x = await api(poolPath(state.pool, '/route'), {
        method: 'POST',
        headers: {'Content-Type': 'application/json'},
        body: JSON.stringify(body),
      });
      renderWhy(x);
    } catch (e) {
      $('why-result').replaceChildren(el('p', {class: 'bad', text: e.message}));
    } finally {
      $('why-submit').disabled = false;
    }
  }

  // ---- refresh ----------------------------------------------------------------------------

  async function loadIndex() {
    // '/admin/', not '/admin': a browser sends the credentials its login prompt got for
    // /admin/ui only to paths under /admin/.
    state.index = await api('/admin/');
    const want = poolFromHash();
    state.pool = null;
    selectPool(want);
  }

  async function refresh() {
    if (state.inFlight || document.hidden) return;
    state.inFlight = true;
    try {
      if (!state.index) await loadIndex();
      if (!state.pool) {
        showError('The gateway has no pools.');
        return;
      }
      const sections = poolSections(state.pool);
      const global = state.index.sections || [];
      const now = Date.now();
      const tasks = [
        loadEndpoints(),
        sections.includes('autoscaler') ? api(poolPath(state.pool, '/autoscaler')).then(renderAutoscaler)
          : Promise.resolve(renderAutoscaler(null)),
        sections.includes('queue') ? api(poolPath(state.pool, '/queue')).then(renderQueue)
          : Promise.resolve(renderQueue(null)),
        global.includes('warmup') ? api('/admin/warmup').then(renderWarmup) : Promise.resolve(renderWarmup(null)),
      ];
      if (global.includes('tenants') && now - state.tenantsAt >= HISTORY_EVERY_MS) {
        state.tenantsAt = now;
        tasks.push(api('/admin/tenants').then(renderTenants));
      }
      if (now - state.recentLoadedAt >= HISTORY_EVERY_MS) {
        state.recentLoadedAt = now;
        tasks.push(loadRecent());
      }
      const results = await Promise.allSettled(tasks);
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) {
        showError(failed.reason.message || String(failed.reason));
        if (failed.reason.status === 404) state.index = null;  // a pool or section went away
      } else {
        showError(null);
        $('auth').hidden = true;
      }
      $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (e) {
      showError(e.message || String(e));
    } finally {
      state.inFlight = false;
    }
  }

  function schedule() {
    clearTimeout(state.timer);
    const every = Number($('interval').value);
    if (!every || document.hidden) return;
    state.timer = setTimeout(async () => {
      await refresh();
      schedule();
    }, every);
  }

  function refreshNow() {
    refresh().then(schedule);
  }

  function start() {
    $('interval').addEventListener('change', refreshNow);
    $('health-filter').addEventListener('change', () => {
      state.health = $('health-filter').value;
      state.offset = 0;
      refreshNow();
    });
    $('page-size').addEventListener('change', () => {
      state.pageSize = Number($('page-size').value);
      state.offset = 0;
      state.lastHistoryAt = 0;
      refreshNow();
    });
    $('page-prev').addEventListener('click', () => {
      state.offset = Math.max(0, state.offset - state.pageSize);
      state.lastHistoryAt = 0;
      refreshNow();
    });
    $('page-next').addEventListener('click', () => {
      state.offset += state.pageSize;
      state.lastHistoryAt = 0;
      refreshNow();
    });
    $('why-form').addEventListener('submit', explain);
    $('auth').addEventListener('submit', (event) => {
      event.preventDefault();
      const token = $('auth-token').value.trim();
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
      $('auth-token').value = '';
      state.index = null;
      refreshNow();
    });
    window.addEventListener('hashchange', () => {
      if (!state.index) return;
      selectPool(poolFromHash());
      state.lastHistoryAt = 0;
      refreshNow();
    });
    // Nobody looks at a hidden tab: no requests until it shows again.
    document.addEventListener('visibilitychange', () => {
      if (document.hidden) clearTimeout(state.timer);
      else refreshNow();
    });
    refreshNow();
  }

  start();
})();
