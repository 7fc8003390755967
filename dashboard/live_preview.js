// The Arithmetic page's in-browser first-order preview: α slider(s) + the "First-order model" bar chart.
// Mounted by dashboard/live_component.py (st.components.v2, no iframe, no build step); the data format is
// described in dashboard/live_preview.py. On every `input` event of a slider the accuracies are recomputed here
// from the cached arrays (base + Σ α_t jvp_t, summed exactly as talos_core.result_arrays.preview_logits) and the chart is
// redrawn synchronously, so the change is painted in the next frame; on `change` (release, or a key press; 200 ms
// debounced) the slider values go to Python as the component state `values`, which re-runs the fragment (exact
// bars, α curve, gallery, URL).

const REPORT_DEBOUNCE_MS = 200;
const REG = (globalThis.__talosLive = globalThis.__talosLive || { payloads: {}, draws: 0, last: null });

// ---------------------------------------------------------------------------------------------------------------
// payload
// ---------------------------------------------------------------------------------------------------------------
function bytesOf(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out.buffer;
}

function decodePayload(p) {
  const evals = new Map();
  for (const e of p.eval) {
    const Arr = e.dtype === 'float64' ? Float64Array : Float32Array;
    evals.set(e.task, {
      n: e.n, c: e.c, f32: e.dtype !== 'float64',
      base: new Arr(bytesOf(e.base)), jvp: new Arr(bytesOf(e.jvp)), labels: new Int32Array(bytesOf(e.labels)),
    });
  }
  const tasks = p.eval.map((e) => e.task);
  const ref = (arr) => tasks.map((_, i) => (arr && arr[i] !== null && arr[i] !== undefined ? arr[i] : NaN));
  return { key: p.key, vectors: p.vectors, evals, tasks, zs: ref(p.zero_shot), st: ref(p.single_task),
           color: p.color, method: p.method };
}

// ---------------------------------------------------------------------------------------------------------------
// numerics (the same operations, in the same order and precision, as numpy in talos_core.schema)
// ---------------------------------------------------------------------------------------------------------------
// accuracy of argmax(base + (((a_1 j_1) + a_2 j_2) + ...)) on one eval task; a_t in float32 (np.float32 α)
function accuracy(d, alphaOf, task) {
  const e = d.evals.get(task);
  if (!e) return NaN;
  const { n, c, f32, base, jvp, labels } = e;
  const T = d.vectors.length;
  const M = n * c;
  const a = d.vectors.map((t) => Math.fround(alphaOf[t] === undefined ? 0 : alphaOf[t]));
  const fr = Math.fround;
  let correct = 0;
  for (let i = 0; i < n; i++) {
    let best = -Infinity;
    let arg = 0;
    for (let k = 0; k < c; k++) {
      const idx = i * c + k;
      let v;
      if (T === 0) {
        v = base[idx];
      } else if (f32) {
        let s = fr(a[0] * jvp[idx]);
        for (let t = 1; t < T; t++) s = fr(s + fr(a[t] * jvp[t * M + idx]));
        v = fr(base[idx] + s);
      } else {
        let s = a[0] * jvp[idx];
        for (let t = 1; t < T; t++) s = s + a[t] * jvp[t * M + idx];
        v = base[idx] + s;
      }
      if (v !== v) { arg = k; break; }  // numpy's argmax: the first NaN is the maximum
      if (k === 0 || v > best) { best = v; arg = k; }
    }
    if (arg === labels[i]) correct++;
  }
  return n ? correct / n : NaN;
}

// numpy's pairwise float64 sum (np.add.reduce), so means match np.mean to the last bit
function npSum(a, lo = 0, n = a.length) {
  if (n < 8) {
    let res = 0;
    for (let i = 0; i < n; i++) res += a[lo + i];
    return res;
  }
  if (n <= 128) {
    const r = [];
    for (let j = 0; j < 8; j++) r.push(a[lo + j]);
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j] += a[lo + i + j];
    let res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[lo + i];
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return npSum(a, lo, n2) + npSum(a, lo + n2, n - n2);
}
const npMean = (a) => (a.length ? npSum(a) / a.length : NaN);
function npNanMean(a) {
  const cnt = a.filter((v) => v === v).length;
  return npSum(a.map((v) => (v === v ? v : 0))) / cnt;
}

// Python's format(x, '.{p}f') / '.{p}g': the decimal digits of the exact binary value, ties to even
function roundDigits(x, digitsAfterPoint) {
  // [integer string of round(|x| * 10^d)] with half-even ties on the exact value
  const exact = Math.abs(x).toFixed(Math.min(100, digitsAfterPoint + 40));
  const [ip, fp = ''] = exact.split('.');
  const keep = ip + fp.slice(0, digitsAfterPoint);
  const rest = fp.slice(digitsAfterPoint);
  let up = rest[0] > '5' || (rest[0] === '5' && /[1-9]/.test(rest.slice(1)));
  if (rest[0] === '5' && !/[1-9]/.test(rest.slice(1))) up = Number(keep[keep.length - 1]) % 2 === 1;
  let digits = BigInt(keep);
  if (up) digits += 1n;
  return digits.toString();
}
function fmtF(x, d) {
  if (x !== x) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  let s = roundDigits(x, d).padStart(d + 1, '0');
  s = d ? `${s.slice(0, s.length - d)}.${s.slice(s.length - d)}` : s;
  const neg = x < 0 || Object.is(x, -0);
  return neg ? `-${s}` : s;
}
function fmtG(x, p) {
  if (x !== x) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  p = Math.max(p, 1);
  const ax = Math.abs(x);
  let exp = Math.floor(Math.log10(ax));
  // digits of |x| rounded to p significant digits; the exponent may move by one after rounding
  for (let attempt = 0; attempt < 3; attempt++) {
    const shift = p - 1 - exp;
    let digits;
    if (shift >= 0) digits = roundDigits(ax, shift);
    else digits = roundDigits(ax / 10 ** -shift, 0);  // large numbers: p digits suffice for the '%g' cases here
    if (digits.length > p) { exp += 1; continue; }
    if (digits.length < p && digits !== '0') { exp -= 1; continue; }
    const sign = x < 0 ? '-' : '';
    if (exp >= -4 && exp < p) {
      let s = shift > 0 ? digits.padStart(shift + 1, '0') : digits + '0'.repeat(-shift);
      if (shift > 0) s = `${s.slice(0, s.length - shift)}.${s.slice(s.length - shift)}`.replace(/0+$/, '').replace(/\.$/, '');
      return sign + s;
    }
    let m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    if (m.includes('.')) m = m.replace(/0+$/, '').replace(/\.$/, '');
    const es = `${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
    return `${sign}${m}e${es}`;
  }
  return String(x);
}

// ---------------------------------------------------------------------------------------------------------------
// chart (the look of dashboard.figures.arithmetic_bars under Streamlit's Plotly theme), plain SVG
// ---------------------------------------------------------------------------------------------------------------
const FONT = '"Source Sans", "Source Sans Pro", sans-serif';
const ZERO_SHOT = '#555555';
const SINGLE_TASK = '#111111';
const esc = (s) => String(s).replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[ch]));
let measureCtx = null;
function textWidth(text, size) {
  measureCtx = measureCtx || document.createElement('canvas').getContext('2d');
  measureCtx.font = `${size}px ${FONT}`;
  return measureCtx.measureText(text).width;
}

// the frame every chart shares: background, title, legend band, y axis 0..1.05 with its grid, category labels
// (turned by 30° when Python says so — dashboard.figures.turn_labels, the rule its twin chart follows — else when
// they would overlap) and an optional x-axis title
function frame(width, cats, title, legend, xTitle, turnLabels) {
  const H = 380;
  const W = Math.max(240, Math.round(width));
  const L = 60, R = 20, T = 95;
  const pw = W - L - R;
  const band = pw / Math.max(1, cats.length);
  const widest = Math.max(0, ...cats.map((t) => textWidth(t, 12)));
  const turn = typeof turnLabels === 'boolean' ? turnLabels : widest > band - 6;
  const labelsH = turn ? widest * 0.5 + 12 * 0.87 + 16 : 30;
  const B = Math.max(50, Math.ceil(labelsH + (xTitle ? 24 : 0)));
  const ph = H - T - B;
  const y = (v) => T + ph * (1 - v / 1.05);
  const cx = (i) => L + band * (i + 0.5);
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" `
    + `style="font-family:${esc(FONT)}" role="img" aria-label="${esc(title)}">`);
  out.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="4" y="20" font-size="16" font-weight="700" fill="#2F2D2B">${esc(title)}</text>`);
  const rows = [[]];
  let lx = 0;
  for (const it of legend) {
    const w = 40 + textWidth(it.text, 12) + 30;
    if (lx > 0 && L + lx + w > W - R) { rows.push([]); lx = 0; }
    rows[rows.length - 1].push([it, lx]);
    lx += w;
  }
  const legendBottom = T - 0.04 * ph;
  rows.forEach((row, r) => {
    const ly = legendBottom - (rows.length - r) * 19 + 9.5;
    for (const [it, x0] of row) {
      const ix = L + x0 + 20;
      if (it.kind === 'bar') {
        out.push(`<rect x="${ix - 6}" y="${ly - 6}" width="12" height="12" fill="${it.color}" fill-opacity="${it.opacity}"/>`);
      }
      if (it.kind === 'zs') out.push(`<path d="M${ix - 10},${ly}H${ix + 10}" stroke="${ZERO_SHOT}" stroke-width="3"/>`);
      if (it.kind === 'st') out.push(`<path d="M${ix - 5},${ly}L${ix},${ly - 5}L${ix + 5},${ly}L${ix},${ly + 5}Z" fill="${SINGLE_TASK}"/>`);
      if (it.kind === 'line') {
        out.push(`<path d="M${ix - 15},${ly}H${ix + 15}" stroke="${it.color}" stroke-width="${it.width}" `
          + `stroke-dasharray="${it.dash}"/>`);
      }
      out.push(`<text x="${ix + 20}" y="${ly + 4.2}" font-size="12" fill="#262730">${esc(it.text)}</text>`);
    }
  });
  for (const v of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
    const yy = y(v);
    out.push(`<path d="M${L},${yy}h${pw}" stroke="#e6eaf1" stroke-width="1" shape-rendering="crispEdges"/>`);
    out.push(`<text x="${L - 9}" y="${yy + 4.2}" text-anchor="end" font-size="12" fill="#808495">${fmtG(v, 6)}</text>`);
  }
  out.push(`<text transform="translate(${L - 44},${T + ph / 2}) rotate(-90)" text-anchor="middle" font-size="14" `
    + `fill="#808495">accuracy</text>`);
  cats.forEach((t, i) => {
    if (turn) {
      out.push(`<text transform="translate(${cx(i) - 4},${T + ph + 14}) rotate(30)" text-anchor="start" font-size="12" `
        + `fill="#808495">${esc(t)}</text>`);
    } else {
      out.push(`<text x="${cx(i)}" y="${T + ph + 21}" text-anchor="middle" font-size="12" fill="#808495">${esc(t)}</text>`);
    }
  });
  if (xTitle) {
    out.push(`<text x="${L + pw / 2}" y="${T + ph + labelsH + 14}" text-anchor="middle" font-size="14" `
      + `fill="#808495">${esc(xTitle)}</text>`);
  }
  return { out, y, cx, band, L, T, pw, ph };
}

function bar(f, x, w, v, color, opacity, textFill, tip) {
  if (!(v === v)) return;
  const top = f.y(Math.min(v, 1.05));
  const h = f.T + f.ph - top;
  f.out.push(`<rect class="talos-live-bar" x="${x - w / 2}" y="${top}" width="${w}" height="${Math.max(0, h)}" `
    + `fill="${color}" fill-opacity="${opacity}"><title>${esc(tip)}</title></rect>`);
  // the value at the bar's foot (as dashboard.figures._value_labels): the markers sit near the bars' tops
  if (h >= 18) {
    f.out.push(`<text x="${x}" y="${f.T + f.ph - 5}" text-anchor="middle" font-size="12" fill="${textFill}">`
      + `${fmtF(v, 2)}</text>`);
  }
}

// a line across the plot; the legend names it (dashboard.figures.legend_line), no label inside the plot
function hline(f, v, color, dash, width) {
  const yy = f.y(v);
  f.out.push(`<path d="M${f.L},${yy}h${f.pw}" stroke="${color}" stroke-width="${width}" stroke-dasharray="${dash}"/>`);
}

// dashboard.figures.arithmetic_bars: bars (opacity 0.6), zero-shot dashes, single-task diamonds, dashed mean
function svgChart(width, tasks, acc, zs, st, color, title, turn) {
  const legend = [{ kind: 'bar', text: 'first-order model', color, opacity: 0.6 }];
  if (zs.some((v) => v === v)) legend.push({ kind: 'zs', text: 'zero-shot' });
  if (st.some((v) => v === v)) legend.push({ kind: 'st', text: 'single-task fine-tuned' });
  const m = acc.some((v) => Number.isFinite(v)) ? npNanMean(acc) : null;
  if (m !== null) legend.push({ kind: 'line', text: `mean ${fmtF(m, 3)}`, color, dash: '9,9', width: 1 });
  const f = frame(width, tasks, title, legend, null, turn);
  tasks.forEach((t, i) => bar(f, f.cx(i), f.band * 0.8, acc[i], color, 0.6, '#ffffff',
                              `${t}: ${fmtF(acc[i], 4)} (first-order model)`));
  tasks.forEach((t, i) => {
    if (zs[i] === zs[i]) {
      f.out.push(`<path d="M${f.cx(i) - 23.8},${f.y(zs[i])}H${f.cx(i) + 23.8}" stroke="${ZERO_SHOT}" stroke-width="3">`
        + `<title>${esc(t)}: zero-shot ${fmtF(zs[i], 4)}</title></path>`);
    }
    if (st[i] === st[i]) {
      const yy = f.y(st[i]), r = 7.15, x = f.cx(i);
      f.out.push(`<path d="M${x - r},${yy}L${x},${yy - r}L${x + r},${yy}L${x},${yy + r}Z" fill="${SINGLE_TASK}">`
        + `<title>${esc(t)}: single-task fine-tuned ${fmtF(st[i], 4)}</title></path>`);
    }
  });
  if (m !== null) hline(f, m, color, '9,9', 1);
  f.out.push('</svg>');
  return f.out.join('');
}

// dashboard.figures.negation_bars: per negated target, target accuracy (method colour) and control accuracy
// (grey) side by side — the control only where the cache has its points (hasControl), else neither its bars nor
// its legend entry; the dotted red line is 95 % of the control's zero-shot accuracy
function svgNegation(width, targets, tacc, cacc, color, control, hasControl, controlZeroShot, title, turn) {
  const legend = [{ kind: 'bar', text: 'target accuracy (lower = forgotten)', color, opacity: 1 }];
  if (hasControl) legend.push({ kind: 'bar', text: `control accuracy (${control})`, color: '#bbbbbb', opacity: 1 });
  const limit = controlZeroShot !== null && controlZeroShot !== undefined && Number.isFinite(controlZeroShot);
  if (limit) legend.push({ kind: 'line', text: '95% of zero-shot control', color: '#d62728', dash: '3,3', width: 1.5 });
  const f = frame(width, targets, title, legend, 'negated task', turn);
  const w = hasControl ? f.band * 0.4 : f.band * 0.6;
  targets.forEach((t, i) => {
    bar(f, f.cx(i) - (hasControl ? w / 2 : 0), w, tacc[i], color, 1, '#ffffff', `${t}: target ${fmtF(tacc[i], 4)}`);
    if (hasControl) {
      bar(f, f.cx(i) + w / 2, w, cacc[i], '#bbbbbb', 1, '#444444', `${t}: control ${control} ${fmtF(cacc[i], 4)}`);
    }
  });
  if (limit) hline(f, 0.95 * controlZeroShot, '#d62728', '3,3', 1.5);
  f.out.push('</svg>');
  return f.out.join('');
}

// ---------------------------------------------------------------------------------------------------------------
// the component
// ---------------------------------------------------------------------------------------------------------------
function build(inst, data) {
  const root = inst.root;
  root.innerHTML = '';
  const box = document.createElement('div');
  box.className = 'talos-live-sliders';
  if (data.sliders.length > 1) box.classList.add('talos-live-grid');
  inst.inputs = [];
  for (const s of data.sliders) {
    const wrap = document.createElement('div');
    wrap.className = 'talos-live-slider';
    const label = document.createElement('label');
    const name = document.createElement('span');
    name.textContent = s.label;
    const val = document.createElement('span');
    val.className = 'talos-live-value';
    label.append(name, val);
    const input = document.createElement('input');
    input.type = 'range';
    input.min = String(s.lo);
    input.max = String(s.hi);
    input.step = String(s.step);
    input.value = String(s.value);
    input.dataset.sliderId = s.id;
    input.setAttribute('aria-label', s.label);
    label.htmlFor = input.id = `talos-live-${inst.uid}-${s.id}`;
    wrap.append(label, input);
    box.append(wrap);
    inst.inputs.push({ spec: s, input, val });
    input.addEventListener('input', () => { inst.update('input'); });
    input.addEventListener('change', () => { inst.scheduleReport(); });  // drawn on `input` already
  }
  const chart = document.createElement('div');
  chart.className = 'talos-live-chart';
  chart.dataset.talosChart = data.chart;
  root.append(box, chart);
  inst.chart = chart;
  inst.sliderIds = sliderSignature(data);
}

// what the sliders are: their ids, spans, steps and tasks (another store, suite or α range rebuilds them)
function sliderSignature(data) {
  return data.sliders.map((s) => [s.id, s.lo, s.hi, s.step, s.tasks.join(',')].join(':')).join('|');
}

function makeInstance(parentElement, setStateValue, setTriggerValue) {
  const root = document.createElement('div');
  root.className = 'talos-live';
  parentElement.appendChild(root);
  const inst = { root, uid: Math.random().toString(36).slice(2, 8), data: null, decoded: null, asked: new Set() };
  inst.values = () => Object.fromEntries(inst.inputs.map(({ spec, input }) => [spec.id, Number(input.value)]));
  inst.report = () => { inst.timer = null; setStateValue('values', inst.values()); };
  // releases 200 ms apart or less (a held arrow key) make one rerun with the last value, like Streamlit's slider
  inst.scheduleReport = () => {
    if (inst.timer) clearTimeout(inst.timer);
    inst.timer = setTimeout(inst.report, REPORT_DEBOUNCE_MS);
  };
  inst.ask = (key) => {
    if (!inst.asked.has(key)) { inst.asked.add(key); setTriggerValue('need', key); }
  };
  inst.update = (why) => {
    const t0 = performance.now();
    const alphaOf = {};
    for (const { spec, input, val } of inst.inputs) {
      const v = Number(input.value);
      val.textContent = fmtG(v, 3);
      const lo = Number(input.min), hi = Number(input.max);
      input.style.setProperty('--pct', `${hi > lo ? (100 * (v - lo)) / (hi - lo) : 0}%`);
      for (const t of spec.tasks) alphaOf[t] = v;
    }
    const d = inst.decoded;
    const tasks = inst.data.tasks;
    if (!d) {
      inst.chart.dataset.state = 'loading';
      inst.chart.textContent = 'Loading the preview arrays…';
      return;
    }
    const width = inst.chart.clientWidth || inst.root.clientWidth || 460;
    let title;
    let values;
    if (inst.data.chart === 'negation_preview') {  // each target negated on its own: θ0 − α_t τ_t
      const control = inst.data.control;
      const tacc = [];
      const cacc = [];
      for (const t of tasks) {
        const one = { [t]: -(alphaOf[t] === undefined ? 0 : alphaOf[t]) };
        tacc.push(accuracy(d, one, t));
        cacc.push(control && d.evals.has(control) ? accuracy(d, one, control) : NaN);
      }
      title = 'First-order model: θ0 − α τ_target';
      values = [...tacc, ...cacc];
      inst.chart.innerHTML = svgNegation(width, tasks, tacc, cacc, d.color, inst.data.control_label || control || '',
                                         Boolean(control && d.evals.has(control)), inst.data.control_zero_shot, title,
                                         inst.data.turn);
    } else {
      const acc = tasks.map((t) => accuracy(d, alphaOf, t));
      title = `First-order model, α = (${tasks.map((t) => fmtG(alphaOf[t] === undefined ? 0 : alphaOf[t], 2)).join(', ')})`
        + ` — mean ${fmtF(npMean(acc), 3)}`;
      values = acc;
      inst.chart.innerHTML = svgChart(width, tasks, acc, tasks.map((t) => d.zs[d.tasks.indexOf(t)]),
                                      tasks.map((t) => d.st[d.tasks.indexOf(t)]), d.color, title, inst.data.turn);
    }
    const t1 = performance.now();
    REG.draws += 1;
    REG.last = { why, start: t0, drawn: t1, title };
    if (why === 'input') REG.lastInput = REG.last;
    Object.assign(inst.chart.dataset, {
      state: 'drawn', key: inst.data.key, title, values: JSON.stringify(values.map((v) => (v === v ? v : null))),
      alphas: JSON.stringify(alphaOf), draws: String(REG.draws), drawnAt: String(t1), computeMs: String(t1 - t0),
    });
  };
  return inst;
}

export default function (component) {
  const { data, parentElement, setStateValue, setTriggerValue } = component;
  if (!data || !Array.isArray(data.sliders)) return undefined;
  if (data.payload && !REG.payloads[data.payload.key]) REG.payloads[data.payload.key] = decodePayload(data.payload);
  let inst = parentElement.__talosLive;
  if (!inst) {
    inst = parentElement.__talosLive = makeInstance(parentElement, setStateValue, setTriggerValue);
    const ro = new ResizeObserver(() => { if (inst.decoded && inst.chart) inst.update('resize'); });
    ro.observe(inst.root);
    inst.ro = ro;
  }
  const fresh = !inst.data || inst.sliderIds !== sliderSignature(data);
  inst.data = data;
  if (fresh) build(inst, data);  // first mount: the values come from Python (state, URL or default)
  // later reruns keep the sliders as the user left them: Python's values are the ones this component reported
  const decoded = REG.payloads[data.key] || null;
  const changed = decoded !== inst.decoded;
  inst.decoded = decoded;
  if (!decoded) inst.ask(data.key);  // this browser lost the arrays (e.g. a reconnect): ask Python to send them
  if (fresh || changed) inst.update('render');
  return undefined;
}

export { accuracy, decodePayload, fmtF, fmtG, npMean, npNanMean, npSum };
