// usage: NODE_PATH=<a node_modules with puppeteer-core> node shot.js OUTDIR name1 url1 [name2 url2 ...]
//
// For each (name, url): a PNG of the whole Grafana page (OUTDIR/name.png) rendered by headless
// Chromium, and OUTDIR/name.json with what every panel shows, read from the DOM:
//   title, key (scenes' "panel-N"), state: "data" | "message" (Grafana's "No data", "Data does
//   not have a time field", ...) | "error" (the red triangle, or the visualisation crashed:
//   "An unexpected error happened"), message, error (the triangle's tooltip text or the crash
//   text; query_errors: the errors of the panel's /api/ds/query answers), query_values (how many
//   non-null values outside time fields those answers held), table columns (name, and whether
//   fully in view), table row count, pixel size and position, text and fold_text (below).
// The JSON also has page_text, the page's whole text (body.innerText, up to 200,000 characters).
// panels.py prints these files as a table.
//
// Environment:
//   CHROMIUM   the browser: a path, or a name looked up on PATH (default "chromium")
//   SHOT_W     window width in px (default 1600); the window is then grown to the page's height
//              (up to 16000 px) so that every panel is in view: Grafana loads panels lazily
//   GF_AUTH    "user:password" for a Grafana without anonymous access (sent as basic auth)
//   REDACT     a regular expression: matching text on the page is replaced before the capture
//              (e.g. to keep a rule file's local path out of committed pictures)
//   SETTLE_MS  extra wait after the page is quiet (default 3000)
//   FOLD_PX    the height of the first screen (default 1200): each panel's `fold_text` is the text
//              of the panel that lies wholly inside the first FOLD_PX px of the page and inside
//              the panel's own box (not scrolled or cut off), what a 1600 x 1200 window shows
//              without scrolling
// Exit status 1 when a page could not be loaded at all.
const puppeteer = require('puppeteer-core');
const fs = require('fs');
const path = require('path');
const sleep = ms => new Promise(r => setTimeout(r, ms));

function browserBinary() {
  const b = process.env.CHROMIUM || 'chromium';
  if (b.includes('/')) return b;
  for (const d of (process.env.PATH || '').split(':')) {
    const p = path.join(d, b);
    if (d && fs.existsSync(p)) return p;
  }
  return b;
}

// what every panel on the page shows; runs in the page
function readPanels(fold) {
  const out = [];
  // the text of `el` a reader sees without scrolling: text nodes inside the box `box` and above
  // `fold` (whole lines: a node cut by either edge does not count)
  function visibleText(el, box) {
    const parts = [];
    const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let t = w.nextNode(); t; t = w.nextNode()) {
      if (!t.nodeValue.trim()) continue;
      range.selectNodeContents(t);
      const r = range.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      if (r.bottom > fold + 0.5 || r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) continue;
      const st = window.getComputedStyle(t.parentElement);
      if (st.visibility === 'hidden' || st.opacity === '0') continue;
      parts.push(t.nodeValue.trim());
    }
    return parts.join(' ');
  }
  for (const s of document.querySelectorAll('[data-testid^="data-testid Panel header"]')) {
    const title = s.getAttribute('data-testid').replace('data-testid Panel header ', '');
    const keyEl = s.closest('[data-viz-panel-key]');
    const r = s.getBoundingClientRect();
    const msgEl = s.querySelector('[data-testid="data-testid Panel data error message"]');
    const errBtn = s.querySelector('[data-testid="data-testid Panel status error"]');
    const loading = !!s.querySelector('[aria-label="Panel loading bar"]');
    // a panel whose visualisation threw while rendering: Grafana's error boundary shows an
    // "An unexpected error happened" alert (with the exception under "Details") in its place
    const crash = s.querySelector('[data-testid="data-testid Alert error"]');
    const p = {
      title, key: keyEl ? keyEl.getAttribute('data-viz-panel-key') : null,
      state: (errBtn || crash) ? 'error' : (msgEl ? 'message' : 'data'),
      message: msgEl ? msgEl.innerText.trim() : '',
      error: crash ? 'render error: ' + crash.textContent.replace(/\s+/g, ' ').trim().slice(0, 400) : '',
      loading,
      w: Math.round(r.width), h: Math.round(r.height), x: Math.round(r.x), y: Math.round(r.y),
    };
    // tables (react-data-grid in Grafana 12.4; older tables also use role=columnheader)
    const grid = s.querySelector('[role="grid"], [role="table"]');
    if (grid) {
      const gr = grid.getBoundingClientRect();
      const right = Math.min(gr.right, r.right) + 1;
      p.table = {
        columns: Array.from(grid.querySelectorAll('[role="columnheader"]')).map(h => {
          const hr = h.getBoundingClientRect();
          return {name: h.innerText.trim().split('\n')[0], visible: hr.left >= gr.left - 1 && hr.right <= right};
        }),
        colcount: parseInt(grid.getAttribute('aria-colcount') || '0') || null,
        // aria-rowcount counts the header row; virtualised rows are not all in the DOM
        rows: grid.getAttribute('aria-rowcount') ? parseInt(grid.getAttribute('aria-rowcount')) - 1
          : Math.max(0, grid.querySelectorAll('[role="row"]').length - 1),
        overflow_px: Math.max(0, grid.scrollWidth - grid.clientWidth),
      };
    }
    p.text = (s.innerText || '').slice(0, 4000);
    p.fold_text = r.top < fold ? visibleText(s, r).slice(0, 4000) : '';
    out.push(p);
  }
  return out;
}

(async () => {
  const [outdir, ...pairs] = process.argv.slice(2);
  if (!outdir || pairs.length === 0 || pairs.length % 2) {
    console.error('usage: node shot.js OUTDIR name1 url1 [name2 url2 ...]');
    process.exit(2);
  }
  fs.mkdirSync(outdir, {recursive: true});
  const W = parseInt(process.env.SHOT_W || '1600');
  const settle = parseInt(process.env.SETTLE_MS || '3000');
  const fold = parseInt(process.env.FOLD_PX || '1200');
  const browser = await puppeteer.launch({executablePath: browserBinary(), headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--hide-scrollbars']});
  let failed = 0;
  for (let i = 0; i < pairs.length; i += 2) {
    const name = pairs[i], url = pairs[i + 1];
    const page = await browser.newPage();
    if (process.env.GF_AUTH)
      await page.setExtraHTTPHeaders({Authorization: 'Basic ' + Buffer.from(process.env.GF_AUTH).toString('base64')});
    const errors = [];
    const queryErrors = {};   // legacy panel id -> [error text]
    const queryValues = {};   // legacy panel id -> non-null values in its query answers
    page.on('pageerror', e => errors.push(String(e).slice(0, 300)));
    page.on('response', async resp => {
      if (!resp.url().includes('/api/ds/query')) return;
      try {
        const pid = resp.request().headers()['x-panel-id'] || '?';
        const body = await resp.json();
        for (const [refId, res] of Object.entries(body.results || {})) {
          if (res && res.error) (queryErrors[pid] = queryErrors[pid] || []).push(`${refId}: ${res.error}`);
          // how many values outside the time fields the panel's queries answered
          for (const fr of (res && res.frames) || []) {
            const fields = (fr.schema && fr.schema.fields) || [];
            const vals = (fr.data && fr.data.values) || [];
            vals.forEach((col, k) => {
              if (fields[k] && fields[k].type === 'time') return;
              queryValues[pid] = (queryValues[pid] || 0) + (col || []).filter(v => v !== null).length;
            });
          }
        }
        if (body.message && resp.status() >= 400) (queryErrors[pid] = queryErrors[pid] || []).push(body.message);
      } catch (e) { /* not JSON, or the page went away */ }
    });
    await page.setViewport({width: W, height: 1200});
    const t0 = Date.now();
    try {
      await page.goto(url, {waitUntil: 'networkidle2', timeout: 90000});
    } catch (e) {
      console.error(name, 'could not load', url, String(e).slice(0, 200));
      failed++; await page.close(); continue;
    }
    await sleep(2000);
    // grow the viewport to the page's height until it settles (lazy panels load once in view)
    let h = 0;
    for (let k = 0; k < 5; k++) {
      const nh = await page.evaluate(() => Math.max(document.documentElement.scrollHeight, document.body.scrollHeight));
      if (Math.abs(nh - h) < 5) break;
      h = nh;
      await page.setViewport({width: W, height: Math.min(h, 16000)});
      await page.waitForNetworkIdle({idleTime: 1500, timeout: 60000}).catch(() => {});
      await sleep(2500);
    }
    await page.waitForNetworkIdle({idleTime: 2000, timeout: 60000}).catch(() => {});
    await sleep(settle);
    const panels = await page.evaluate(readPanels, fold);
    // the whole page's text (pages without panels: the alert list)
    const pageText = await page.evaluate(() => (document.body.innerText || '').slice(0, 200000));
    // the error triangle's text is a tooltip: hover each one and read it
    const btns = await page.$$('[data-testid="data-testid Panel status error"]');
    for (const b of btns) {
      try {
        const title = await b.evaluate(el => {
          const s = el.closest('[data-testid^="data-testid Panel header"]');
          return s ? s.getAttribute('data-testid').replace('data-testid Panel header ', '') : null;
        });
        await b.hover();
        await sleep(500);
        const tip = await page.evaluate(() =>
          Array.from(document.querySelectorAll('[role="tooltip"]')).map(e => e.innerText.trim()).filter(Boolean).join(' | '));
        const p = panels.find(q => q.title === title && !q.tip_read);
        if (p) { p.error = [tip, p.error].filter(Boolean).join(' | '); p.tip_read = true; }
      } catch (e) { /* the button went away */ }
    }
    await page.mouse.move(0, 0);
    for (const p of panels) delete p.tip_read;
    for (const p of panels) {
      const id = p.key && p.key.startsWith('panel-') ? p.key.slice(6) : null;
      if (id && queryErrors[id]) p.query_errors = queryErrors[id];
      if (id) p.query_values = queryValues[id] || 0;
    }
    const redacted = process.env.REDACT ? await page.evaluate((re) => {
      let n = 0;
      const rx = new RegExp(re, 'g');
      const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      for (let t = w.nextNode(); t; t = w.nextNode()) {
        if (rx.test(t.nodeValue)) { rx.lastIndex = 0; t.nodeValue = t.nodeValue.replace(rx, '[redacted]'); n++; }
      }
      return n;
    }, process.env.REDACT) : 0;
    if (redacted) console.log(name, 'redacted', redacted, 'text nodes');
    await sleep(300);
    await page.screenshot({path: path.join(outdir, `${name}.png`), fullPage: false, captureBeyondViewport: false});
    const took = (Date.now() - t0) / 1000;
    fs.writeFileSync(path.join(outdir, `${name}.json`), JSON.stringify(
      {name, url, taken_at: new Date().toISOString(), width: W, height: h, fold_px: fold, took_s: took, page_errors: errors,
       query_errors: queryErrors, panels, page_text: pageText}, null, 1));
    const count = st => panels.filter(p => p.state === st).length;
    console.log(name, 'h', h, 'panels', panels.length, 'data', count('data'), 'message', count('message'),
      'error', count('error'), 'pageerrors', errors.length, took.toFixed(0) + 's');
    await page.close();
  }
  await browser.close();
  process.exit(failed ? 1 : 0);
})().catch(e => { console.error(e); process.exit(1); });
