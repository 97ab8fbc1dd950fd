// The console's only script: live figures from the event stream, the small charts, and
// the actions' confirmations. Plain ES module, no build step. Everything from the server
// is written with textContent (never innerHTML): names and payloads come from users.

const csrf = document.querySelector('meta[name="csrf"]')?.content ?? "";
const HISTORY_MS = 5 * 60 * 1000; // the charts show the last five minutes, kept here only
const history = new Map();

function remember(key, value, now) {
  let points = history.get(key);
  if (!points) history.set(key, (points = []));
  points.push([now, value]);
  while (points.length && points[0][0] < now - HISTORY_MS) points.shift();
  return points;
}

function draw(canvas, points) {
  if (!canvas) return;
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  if (points.length < 2) return;
  const t0 = points[0][0];
  const span = Math.max(1, points[points.length - 1][0] - t0);
  const top = Math.max(1, ...points.map((p) => p[1]));
  ctx.strokeStyle = "#2b6cb0";
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  points.forEach(([t, v], i) => {
    const x = ((t - t0) / span) * (width - 2) + 1;
    const y = height - 2 - (v / top) * (height - 4);
    if (i === 0) ctx.moveTo(x, y);
    else ctx.lineTo(x, y);
  });
  ctx.stroke();
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

function show(element, field, value) {
  const target = element.querySelector(`[data-field="${field}"]`);
  if (target) target.textContent = String(value);
}

function showChannel(element, name, c, now) {
  show(element, "length", c.length);
  show(element, "rate_in", c.rate_in.toFixed(1));
  show(element, "rate_out", c.rate_out.toFixed(1));
  show(element, "retained_bytes", bytes(c.retained_bytes));
  const nothing = element.matches("dl.facts") ? "nothing: every durable and session acknowledged it" : "–";
  show(element, "retained_by", c.retained_by ?? nothing);
  draw(element.querySelector('canvas[data-series="length"]'),
       remember(`length ${name}`, c.length, now));
}

function showDurables(channelName, channel, now) {
  for (const row of document.querySelectorAll("tr[data-durable]")) {
    const d = channel.durables[row.dataset.durable];
    row.classList.toggle("gone", !d);
    if (!d) continue;
    show(row, "depth", d.depth);
    show(row, "transaction_depth", d.transaction_depth);
    show(row, "lag", d.lag ?? "–");
    show(row, "oldest_unacked_age_s", d.oldest_unacked_age_s.toFixed(1));
    draw(row.querySelector('canvas[data-series="depth"]'),
         remember(`depth ${channelName} ${row.dataset.durable}`, d.depth, now));
  }
}

function showSessions(sessions) {
  for (const row of document.querySelectorAll("tr[data-session]")) {
    const s = sessions[row.dataset.session];
    row.classList.toggle("gone", !s);
    if (!s) continue;
    show(row, "state", s.state);
    show(row, "queue", s.queue);
    show(row, "keepalive_left_s", s.keepalive_left_s === null ? "–" : `${s.keepalive_left_s.toFixed(0)} s`);
  }
}

function apply(state) {
  const status = document.getElementById("status");
  document.body.classList.toggle("down", !state.up);
  if (!state.up) {
    const since = state.down_since ? new Date(state.down_since * 1000).toLocaleTimeString() : "";
    status.textContent = `server unreachable${since ? " since " + since : ""}`;
    status.title = state.error;
    status.className = "status down";
    return;
  }
  if (document.querySelector("main .outage")) { // rendered during an outage: now it is over
    location.reload();
    return;
  }
  const now = Date.now();
  status.textContent = `live · ${new Date(now).toLocaleTimeString()}`;
  status.className = "status up";
  status.title = "";
  const memory = document.getElementById("memory");
  if (memory && state.memory) memory.textContent = state.memory;
  for (const element of document.querySelectorAll("[data-channel]")) {
    const name = element.dataset.channel;
    const c = state.channels[name];
    element.classList.toggle("gone", !c);
    if (!c) continue;
    showChannel(element, name, c, now);
    if (element.matches("dl.facts")) showDurables(name, c, now);
  }
  showSessions(state.sessions);
  showNews(state.channels);
}

function showNews(channels) {
  const news = document.getElementById("news");
  if (!news) return;
  const shown = new Set([...document.querySelectorAll("tr[data-channel]")].map((r) => r.dataset.channel));
  const fresh = Object.keys(channels).filter((name) => !shown.has(name));
  news.hidden = fresh.length === 0;
  news.firstElementChild.textContent =
    `${fresh.length} new channel${fresh.length === 1 ? "" : "s"} since this page was loaded: reload`;
}

function flash(text, bad) {
  const p = document.getElementById("flash");
  p.textContent = text;
  p.className = bad ? "flash bad" : "flash";
  p.hidden = false;
}

async function act(button) {
  const about = { action: button.dataset.action };
  for (const key of ["channel", "durable", "session"]) {
    if (button.dataset[key] !== undefined) about[key] = button.dataset[key];
  }
  const asked = await fetch(`/api/impact?${new URLSearchParams(about)}`, { credentials: "same-origin" });
  const impact = await asked.json();
  if (!asked.ok) { flash(impact.error, true); return; }
  if (!window.confirm(`${impact.message}\n\nThis cannot be undone. Go on?`)) {
    flash("nothing changed", false);
    return;
  }
  const done = await fetch(`/actions/${encodeURIComponent(about.action)}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", "x-durables-csrf": csrf },
    body: JSON.stringify(about),
  });
  const result = await done.json();
  flash(done.ok ? result.done : result.error, !done.ok);
  if (done.ok && about.action !== "purge") {
    sessionStorage.setItem("durables-flash", result.done);
    setTimeout(() => location.reload(), 500);
  }
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.action");
  if (button) act(button).catch((error) => flash(String(error), true));
});

const kept = sessionStorage.getItem("durables-flash");
if (kept) { sessionStorage.removeItem("durables-flash"); flash(kept, false); }

const stream = new EventSource("/events");
stream.onmessage = (message) => apply(JSON.parse(message.data));
stream.onerror = () => {
  const status = document.getElementById("status");
  status.textContent = "console unreachable (retrying)";
  status.className = "status down";
};
