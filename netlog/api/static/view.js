// netlog's live view: follows GET /network's cursor, keeps a small summary
// of each exchange (never its bodies), renders only the rows in sight, and
// fetches one exchange's detail from GET /exchange when it is opened. The
// filter box takes the filter language (docs/agents.rst), matched by the
// API's GET /exchanges, so the box and the API show the same exchanges.
// Everything from the log is shown as text (textContent), never as markup.
"use strict";

(function () {
  // Bytes of lines asked for per page of /network; the first page is
  // smaller, so the first rows come quickly on a large log.
  const PAGE_LIMIT = 4 << 20;
  const FIRST_PAGE_LIMIT = 256 << 10;
  // Milliseconds between polls when the log has nothing new.
  const POLL_IDLE_MS = 250;
  // Milliseconds before asking again after the API could not be reached.
  const RETRY_MS = 1000;
  // Height of a row in pixels (the CSS says the same).
  const ROW_HEIGHT = 22;
  // Rows rendered beyond the ones in sight, above and below.
  const OVERSCAN = 8;
  // Characters of a body shown in the detail pane before "show all".
  const BODY_PREVIEW = 200000;
  // Matches asked of GET /exchanges per request, and the seconds one waits
  // for the next match once it has caught up with the log.
  const MATCH_LIMIT = 1000;
  const MATCH_WAIT = 30;
  // Milliseconds of quiet in the filter box before its expression is asked.
  const TYPING_MS = 150;

  const $ = (id) => document.getElementById(id);
  const scroller = $("scroller");
  const sizer = $("spacer");
  const rowsBox = $("rows");

  // --- state -------------------------------------------------------------
  let rows = [];          // summaries, in start order
  let byId = new Map();   // exchange id -> summary
  let shown = [];         // the rows the filters let through
  let cursor = 0;         // the n of the last line read
  let hosts = new Map();  // host -> rows
  let hostsChanged = false;
  let dirty = true;
  let openCount = 0;
  let lastTime = 0;       // the latest start or end seen
  let selected = null;
  let followEnd = true;   // keep the newest row in sight
  const filter = { status: "", kind: "", host: "" };
  const pool = [];        // row elements, reused

  const URL_PARTS = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)([^#]*)/i;

  function header(headers, name) {
    if (!Array.isArray(headers)) return null;
    for (const pair of headers) {
      if (Array.isArray(pair) && typeof pair[0] === "string" && pair[0].toLowerCase() === name) return String(pair[1]);
    }
    return null;
  }

  function num(v) { return typeof v === "number" && isFinite(v) ? v : null; }

  // The kind the filters and the Type column know a row by.
  function classify(row, contentType) {
    if (row.tunnel) return "tunnel";
    if (row.ws || row.status === 101) return "websocket";
    switch (row.dest) {
      case "document": case "iframe": case "frame": return "document";
      case "script": case "worker": case "sharedworker": case "serviceworker": return "script";
      case "style": return "style";
      case "image": return "image";
      case "empty": return "xhr";
    }
    const type = (contentType || "").toLowerCase();
    if (type.startsWith("text/html")) return "document";
    if (type.includes("javascript") || type.includes("ecmascript")) return "script";
    if (type.startsWith("text/css")) return "style";
    if (type.startsWith("image/")) return "image";
    if (type.includes("json") || type.includes("xml")) return "xhr";
    return "other";
  }

  const TYPE_LABEL = {
    document: "document", xhr: "fetch/xhr", script: "script", style: "style", image: "image",
    websocket: "websocket", tunnel: "tunnel", other: "other",
  };

  // --- lines -------------------------------------------------------------
  function opened(line) {
    if (byId.has(line.id)) return;
    const request = line.request && typeof line.request === "object" ? line.request : {};
    const server = line.server && typeof line.server === "object" ? line.server : {};
    const tunnel = line.kind === "tunnel";
    const url = typeof request.url === "string" ? request.url : "";
    const parts = URL_PARTS.exec(url);
    // The host the browser addressed (a site's backend may be elsewhere).
    let host = typeof server.host === "string" ? server.host : "";
    let path = "";
    if (parts) {
      const named = parts[1].replace(/^[^@]*@/, "").replace(/:\d+$/, "").toLowerCase();
      if (named) host = named;
      path = tunnel ? parts[1] : (parts[2] || "/");
    } else {
      path = url;
    }
    const started = num(line.started) ?? num(line.time) ?? 0;
    const row = {
      id: line.id, endN: 0, started: started, ended: null,
      method: request.method || (tunnel ? "CONNECT" : ""),
      url: url || (tunnel ? "https://" + host + "/" : ""), host: host, path: path,
      tunnel: tunnel, ws: /^wss?:/i.test(url), dest: (header(request.headers, "sec-fetch-dest") || "").toLowerCase(),
      status: null, reason: "", state: "open", why: "", size: null, type: "other",
      // The protocol toward the browser, as DevTools names it.
      protocol: tunnel ? "" : request.version === "HTTP/2" ? "h2" : String(request.version || "").toLowerCase(),
      seenOpen: Date.now(), seenEnd: 0,
    };
    row.type = classify(row, null);
    let i = rows.length;
    while (i > 0 && rows[i - 1].started > started) i--;
    if (i === rows.length) rows.push(row); else rows.splice(i, 0, row);
    byId.set(row.id, row);
    openCount++;
    hosts.set(host, (hosts.get(host) || 0) + 1);
    if (hosts.get(host) === 1) hostsChanged = true;
    if (started > lastTime) lastTime = started;
  }

  function ended(line) {
    const row = byId.get(line.id);
    if (!row || row.state !== "open") return;
    openCount--;
    row.endN = line.n;
    row.seenEnd = Date.now();
    row.ended = num(line.ended) ?? num(line.time) ?? row.started;
    if (row.ended > lastTime) lastTime = row.ended;
    const response = line.response && typeof line.response === "object" ? line.response : null;
    const bytes = line.bytes && typeof line.bytes === "object" ? line.bytes : {};
    if (line._refused) {
      row.state = "refused";
      row.why = String(line._refused.reason || "");
      row.size = num(bytes.down);
    } else if (line._failed) {
      row.state = "failed";
      row.why = String(line._failed.reason || "");
      if (response && line._failed.status === undefined) {
        row.status = num(response.status);
      }
      row.size = response && response.body ? num(response.body.size) : num(bytes.down);
    } else {
      row.state = "done";
      if (response) {
        row.status = num(response.status);
        row.reason = String(response.reason || "");
        row.size = response.body ? num(response.body.size) : null;
      } else if (row.tunnel) {
        row.status = 200;
        row.size = num(bytes.down);
      } else {
        row.size = num(bytes.down);
      }
    }
    if (line._websocket) row.ws = true;
    row.type = classify(row, response ? header(response.headers, "content-type") : null);
    if (selected === row) showDetail(row);
  }

  function beginAgain() {
    rows = [];
    byId = new Map();
    hosts = new Map();
    hostsChanged = true;
    openCount = 0;
    lastTime = 0;
    closeDetail();
    notice("The log was begun again (replaced or truncated): the list starts again from its first line.");
  }

  function notice(text) {
    const box = $("notice");
    box.textContent = text;
    box.hidden = !text;
  }

  let apiDown = false;
  async function poll() {
    for (;;) {
      let page;
      try {
        const limit = rows.length ? PAGE_LIMIT : FIRST_PAGE_LIMIT;
        const answer = await fetch("network?after=" + cursor + "&limit=" + limit, { cache: "no-store" });
        if (!answer.ok) throw new Error("the API answered " + answer.status);
        page = await answer.json();
      } catch (e) {
        apiDown = true;
        notice("The API can't be reached (" + e.message + "); trying again.");
        await sleep(RETRY_MS);
        continue;
      }
      if (apiDown) { apiDown = false; notice(""); }
      if (page.begun_again) beginAgain();
      for (const line of page.lines) {
        if (line.type === "open") opened(line); else if (line.type === "end") ended(line);
      }
      cursor = page.next;
      if (page.lines.length || page.begun_again) {
        dirty = true;
        schedule();
      }
      if (!page.lines.length) await sleep(POLL_IDLE_MS);
    }
  }

  function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

  // --- filters -----------------------------------------------------------
  function statusClass(row) {
    if (row.state === "open" || row.state === "failed" || row.state === "refused") return row.state;
    if (row.status === null) return "";
    return Math.floor(row.status / 100) + "xx";
  }

  function passes(row) {
    if (filter.host && row.host !== filter.host) return false;
    if (filter.kind && row.type !== filter.kind) return false;
    if (filter.status && statusClass(row) !== filter.status) return false;
    if (matched !== null && !matched.has(row.id)) return false;
    return true;
  }

  // --- the filter box: the filter language, matched by the API -------------
  let expression = "";      // the expression in force
  let matched = null;       // ids of the ended exchanges it matched; null: none typed
  let matchCursor = 0;      // the line GET /exchanges has read up to for it
  let matchRun = null;      // the AbortController of the requests for it
  let typing = 0;           // the timer that waits for the typing to stop
  let settle = null;        // resolves matchSettled
  let matchSettled = Promise.resolve();  // resolved once the expression has caught up

  function unsettle() {
    if (!settle) matchSettled = new Promise((resolve) => { settle = resolve; });
  }

  function settled() {
    if (settle) { settle(); settle = null; }
  }

  const FILTER_HELP = $("filter-text").title;
  let filterNoticed = false;
  function filterError(text) {
    const box = $("filter-text");
    box.title = text ? "Filter: " + text : FILTER_HELP;
    box.classList.toggle("bad", !!text);
    box.setAttribute("aria-invalid", text ? "true" : "false");
    if (text || filterNoticed) notice(text ? "Filter: " + text : "");
    filterNoticed = !!text;
  }

  function typed(text) {
    if (text === expression) return;
    unsettle();
    clearTimeout(typing);
    // An emptied box shows every row at once; an expression waits for the typing to stop.
    if (text) typing = setTimeout(() => useExpression(text), TYPING_MS); else useExpression(text);
  }

  function useExpression(text) {
    expression = text;
    if (matchRun) matchRun.abort();
    matchRun = null;
    matchCursor = 0;
    filterError("");
    matched = text ? new Set() : null;
    dirty = true;
    schedule();
    if (!text) { settled(); return; }
    matchRun = new AbortController();
    followMatches(matchRun, text);
  }

  // Ask GET /exchanges for the expression's matches from the log's start,
  // then hold a wait for each next one: no polling while nothing matches.
  async function followMatches(run, text) {
    let caughtUp = false;
    while (!run.signal.aborted) {
      let found;
      try {
        const answer = await fetch(
          "exchanges?filter=" + encodeURIComponent(text) + "&after=" + matchCursor + "&limit=" + MATCH_LIMIT +
            (caughtUp ? "&wait=" + MATCH_WAIT : ""),
          { cache: "no-store", signal: run.signal });
        if (answer.status === 400) {
          const said = await answer.json();
          if (run.signal.aborted) return;
          filterError(said.reason || said.error || "not a filter");
          dirty = true;
          schedule();
          settled();
          return;
        }
        if (!answer.ok) throw new Error("the API answered " + answer.status);
        found = await answer.json();
      } catch (e) {
        if (run.signal.aborted) return;
        settled();
        await sleep(RETRY_MS);
        continue;
      }
      if (run.signal.aborted) return;
      if (found.begun_again) matched.clear();
      for (const exchange of found.exchanges) matched.add(exchange.id);
      matchCursor = found.next;
      if (found.exchanges.length || found.begun_again) {
        dirty = true;
        schedule();
      }
      if (!found.more && !caughtUp) {
        caughtUp = true;
        settled();
      }
    }
  }

  function refilter() {
    const next = [];
    let size = 0;
    for (const row of rows) {
      if (passes(row)) {
        next.push(row);
        if (row.size) size += row.size;
      }
    }
    shown = next;
    $("counts").textContent =
      shown.length.toLocaleString("en") + " / " + rows.length.toLocaleString("en") + " requests, " +
      formatSize(size) + " shown" + (openCount ? ", " + openCount.toLocaleString("en") + " open" : "");
  }

  function readFilters() {
    typed($("filter-text").value.trim());
    filter.status = $("filter-status").value;
    filter.kind = $("filter-kind").value;
    filter.host = $("filter-host").value;
    dirty = true;
    schedule();
  }

  function refreshHosts() {
    const select = $("filter-host");
    const current = select.value;
    while (select.options.length > 1) select.remove(1);
    for (const host of Array.from(hosts.keys()).sort()) {
      const option = document.createElement("option");
      option.value = host;
      option.textContent = host;
      select.appendChild(option);
    }
    select.value = hosts.has(current) ? current : "";
    hostsChanged = false;
  }

  // --- rendering ---------------------------------------------------------
  let scheduled = false;
  let ticking = false;
  function schedule() {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(render);
  }

  function formatSize(n) {
    if (n === null || n === undefined) return "";
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " kB";
    return (n / 1048576).toFixed(1) + " MB";
  }

  function formatDuration(seconds) {
    if (seconds === null) return "";
    const ms = seconds * 1000;
    return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(2) + " s";
  }

  function statusText(row) {
    if (row.state === "open") return row.tunnel ? "open (tunnel)" : "open";
    if (row.state === "refused") return "refused";
    if (row.state === "failed") return row.status !== null ? "failed (" + row.status + ")" : "failed";
    return row.status !== null ? String(row.status) : "";
  }

  function makeRow() {
    const element = document.createElement("div");
    element.className = "row";
    for (const name of ["c-status", "c-method", "c-proto", "c-host", "c-path", "c-type", "c-size", "c-time", "c-fall"]) {
      const cell = document.createElement("span");
      cell.className = name;
      element.appendChild(cell);
    }
    const bar = document.createElement("div");
    bar.className = "bar";
    element.lastChild.appendChild(bar);
    element.addEventListener("click", () => {
      const row = element._row;
      if (row) select(row);
    });
    rowsBox.appendChild(element);
    return element;
  }

  let renderMs = [];      // how long each render took, for the benchmark
  function render() {
    const began = performance.now();
    scheduled = false;
    if (hostsChanged) refreshHosts();
    if (dirty) {
      refilter();
      dirty = false;
      sizer.style.height = shown.length * ROW_HEIGHT + "px";
      if (followEnd) scroller.scrollTop = scroller.scrollHeight;
    }
    const top = scroller.scrollTop;
    const height = scroller.clientHeight;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(shown.length, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    const start = rows.length ? rows[0].started : 0;
    const now = Date.now() / 1000;
    const end = Math.max(openCount ? now : lastTime, lastTime);
    const span = Math.max(end - start, 0.001);
    rowsBox.style.transform = "translateY(" + first * ROW_HEIGHT + "px)";
    const needed = last - first;
    while (pool.length < needed) pool.push(makeRow());
    for (let i = 0; i < pool.length; i++) {
      const element = pool[i];
      if (i >= needed) {
        element.hidden = true;
        element._row = null;
        delete element.dataset.id;  // a hidden row names no exchange
        continue;
      }
      const row = shown[first + i];
      element.hidden = false;
      element._row = row;
      const cells = element.children;
      let cls = "row";
      if ((first + i) % 2) cls += " odd";
      if (row === selected) cls += " selected";
      if (row.state !== "done") cls += " " + row.state;
      else if (row.status >= 500) cls += " e5";
      else if (row.status >= 400) cls += " e4";
      element.className = cls;
      element.dataset.id = row.id;
      cells[0].textContent = statusText(row);
      cells[0].title = row.why ? row.state + ": " + row.why : row.reason;
      cells[1].textContent = row.method;
      cells[2].textContent = row.protocol;
      cells[3].textContent = row.host;
      cells[3].title = row.host;
      cells[4].textContent = row.path;
      cells[4].title = row.url;
      cells[5].textContent = TYPE_LABEL[row.type];
      cells[6].textContent = formatSize(row.size);
      const stop = row.ended === null ? now : row.ended;
      cells[7].textContent = row.ended === null ? "" : formatDuration(Math.max(0, stop - row.started));
      const bar = cells[8].firstChild;
      bar.style.left = ((row.started - start) / span) * 100 + "%";
      bar.style.width = (Math.max(0, stop - row.started) / span) * 100 + "%";
    }
    if (renderMs.length < 1000) renderMs.push(performance.now() - began);
    if (openCount && !ticking) {
      // open rows' bars grow with time
      ticking = true;
      setTimeout(() => { ticking = false; schedule(); }, 500);
    }
  }

  scroller.addEventListener("scroll", () => {
    followEnd = scroller.scrollTop + scroller.clientHeight >= scroller.scrollHeight - ROW_HEIGHT;
    schedule();
  });
  window.addEventListener("resize", schedule);

  // --- detail ------------------------------------------------------------
  function el(tag, className, text) {
    const element = document.createElement(tag);
    if (className) element.className = className;
    if (text !== undefined && text !== null) element.textContent = String(text);
    return element;
  }

  function section(body, title) {
    body.appendChild(el("h3", "", title));
  }

  function table(body, pairs, empty) {
    if (!pairs.length) {
      if (empty) body.appendChild(el("div", "note", empty));
      return;
    }
    const t = el("table");
    for (const [k, v] of pairs) {
      const tr = el("tr");
      tr.appendChild(el("td", "k", k));
      tr.appendChild(el("td", "", v));
      t.appendChild(tr);
    }
    body.appendChild(t);
  }

  function problem(body, text) { body.appendChild(el("div", "problem", text)); }

  function bodyText(body, text, mimeType) {
    let shownText = text;
    if (/json/i.test(mimeType || "")) {
      try { shownText = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* as it came */ }
    }
    const pre = el("pre", "", shownText.length > BODY_PREVIEW ? shownText.slice(0, BODY_PREVIEW) : shownText);
    body.appendChild(pre);
    if (shownText.length > BODY_PREVIEW) {
      const more = el("button", "", "Show all " + shownText.length.toLocaleString("en") + " characters");
      more.type = "button";
      more.addEventListener("click", () => { pre.textContent = shownText; more.remove(); });
      body.appendChild(more);
    }
  }

  function headerPairs(headers) {
    return Array.isArray(headers) ? headers.map((p) => [String(p[0]), String(p[1])]) : [];
  }

  function iso(seconds) {
    return typeof seconds === "number" ? new Date(seconds * 1000).toISOString() : "";
  }

  // Who answered: a replayed answer came from the recording, not the
  // backend the open line names (its address is null: nothing was connected to).
  function serverText(server, end) {
    const named = (server.host || "") + ":" + (server.port || "");
    if (end && end._replayed !== undefined) {
      const was = end._replayedServer || {};
      return "the recording, not the backend (recorded from " + (was.address || server.host || "") +
        ":" + (was.port || server.port || "") + ")";
    }
    if (end && end._unmatched) return "none: netlog answered (the backend " + named + " was not asked)";
    return named + (server.address ? " (" + server.address + ")" : "");
  }

  // What replay did with the exchange (docs/replay.rst's marks), or "".
  function replayText(end) {
    if (!end) return "";
    if (end._replayed !== undefined) {
      return "replayed: the recording's exchange " + end._replayed + (end._replayedCut ? ", its body cut as recorded" : "");
    }
    if (end._unmatched) return "unmatched: no recorded answer (netlog's 404)";
    if (end._forwarded) return "forwarded: no recorded answer, sent to the site's backend";
    return "";
  }

  function renderDetail(body, d) {
    const open = d.open || {};
    const end = d.end;
    const entry = d.entry || {};
    const request = open.request || {};
    const server = open.server || {};
    const req = entry.request || {};
    const res = entry.response || {};

    section(body, "General");
    const general = [
      ["URL", req.url || request.url || ""],
      ["Method", req.method || request.method || ""],
      ["Status", end ? (end.response ? (end.response.status + " " + (end.response.reason || "")).trim() : "no answer") : "open"],
      ["Protocol", request.version || ""],
      ["Kind", open.kind || ""],
      ["Proxy", open.proxy || ""],
      ["Connection", open.connection || ""],
      ["Client", open.client || ""],
      ["Server", serverText(server, end)],
      ["Started", iso(open.started)],
      ["Exchange", "open line " + open.n + (end ? ", end line " + end.n : "")],
    ];
    const answer = replayText(end);
    if (answer) general.push(["Answer", answer]);
    if (end && end.closed_by) general.push(["Closed by", end.closed_by]);
    if (end && end.bytes) general.push(["Bytes", "up " + end.bytes.up + ", down " + end.bytes.down]);
    table(body, general);

    if (!end) problem(body, "Still open: no end line yet.");
    if (end && end._refused) {
      problem(body, "Refused by netlog: " + end._refused.reason + " (the browser got netlog's own " + end._refused.status + ")");
    }
    if (end && end._failed) {
      problem(body, "Failed: " + end._failed.reason +
        (end._failed.status !== undefined ? " (no answer from the server; the browser got netlog's own " + end._failed.status + ")"
          : " (after the server's answer began)"));
    }
    if (end && end._unparsed) problem(body, "The answer could not be read as HTTP; it was relayed as it came.");
    if (end && end._unmatched) problem(body, "Replay: the recording has no answer for this request; netlog answered 404.");
    if (end && end.request_body && end.request_body._truncated) {
      problem(body, "Request body truncated: " + end.request_body.size + " bytes sent, only the first 10 MB kept.");
    }
    if (end && end.response && end.response.body && end.response.body._truncated) {
      problem(body, "Response body truncated: " + end.response.body.size + " bytes came, only the first 1 MB kept.");
    }

    if (Array.isArray(open._rules) && open._rules.length) {
      section(body, "Rules");
      table(body, open._rules.map((r) => [String(r.rule || ""), String(r.action || "")]));
    }

    section(body, "Request headers");
    table(body, headerPairs(request.headers), "none");
    if (Array.isArray(req.queryString) && req.queryString.length) {
      section(body, "Query parameters");
      table(body, req.queryString.map((p) => [p.name, p.value]));
    }
    if (Array.isArray(req.cookies) && req.cookies.length) {
      section(body, "Request cookies");
      table(body, req.cookies.map((c) => [c.name, c.value]));
    }
    const post = req.postData;
    if (post) {
      if (Array.isArray(post.params) && post.params.length) {
        section(body, "Form");
        table(body, post.params.map((p) => [p.name, p.fileName ? (p.value || "") + " (file " + p.fileName + ")" : (p.value || "")]));
      }
      section(body, "Request body" + (post.mimeType ? " (" + post.mimeType + ")" : ""));
      if (typeof post.text === "string") bodyText(body, post.text, post.mimeType);
      else body.appendChild(el("div", "note", end && end.request_body ? end.request_body.size + " bytes, not kept" : "not kept"));
    }

    if (end && end.response) {
      section(body, "Response headers" + (end._refused || end._failed ? " (netlog's own answer)" : ""));
      table(body, headerPairs(end.response.headers), "none");
    }
    if (Array.isArray(res.cookies) && res.cookies.length) {
      section(body, "Response cookies (Set-Cookie)");
      const t = el("table");
      for (const c of res.cookies) {
        const attrs = [];
        if (c.expires) attrs.push("expires " + c.expires);
        if (c.path) attrs.push("path " + c.path);
        if (c.domain) attrs.push("domain " + c.domain);
        if (c.httpOnly) attrs.push("HttpOnly");
        if (c.secure) attrs.push("Secure");
        if (c._sameSite) attrs.push("SameSite=" + c._sameSite);
        const tr = el("tr");
        tr.appendChild(el("td", "k", c.name));
        tr.appendChild(el("td", "", c.value + (attrs.length ? "  ·  " + attrs.join("; ") : "  ·  session")));
        t.appendChild(tr);
      }
      body.appendChild(t);
    }
    const content = res.content;
    if (content && res.status !== -1) {
      section(body, "Response body" + (content.mimeType ? " (" + content.mimeType + ")" : ""));
      if (typeof content.text === "string") bodyText(body, content.text, content.mimeType);
      else {
        const sha = content._sha256 || (end.response.body && end.response.body.sha256);
        body.appendChild(el("div", "note", content.size + " bytes" + (sha ? ", sha256 " + sha : "")));
      }
    }

    if (entry._websocket) {
      section(body, "WebSocket");
      table(body, Object.entries(entry._websocket).map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : String(v)]));
    }
    if (Array.isArray(entry._webSocketMessages) && entry._webSocketMessages.length) {
      section(body, "WebSocket messages (" + entry._webSocketMessages.length + ")");
      table(body, entry._webSocketMessages.map((m) => [
        (m.type === "send" ? "↑ " : "↓ ") + iso(m.time),
        (m.opcode === 2 ? "binary (base64) " : "") + (typeof m.data === "string" ? m.data : "") +
          (m._truncated ? "  ·  truncated" : ""),
      ]));
    }
    if (end) {
      section(body, "Timings");
      const timings = entry.timings || {};
      const pairs = ["connect", "send", "wait", "receive"].map((k) => [k, timings[k] === -1 ? "—" : timings[k] + " ms"]);
      pairs.push(["total", entry.time + " ms"]);
      const times = end.times || {};
      for (const k of ["connected", "sent", "first_byte", "end"]) pairs.push([k, times[k] === null || times[k] === undefined ? "—" : iso(times[k])]);
      table(body, pairs);
    }
  }

  let detailToken = 0;
  async function showDetail(row) {
    const token = ++detailToken;
    const pane = $("detail");
    pane.hidden = false;
    document.querySelector("main").classList.add("with-detail");
    $("detail-title").textContent = row.method + " " + row.url;
    const body = $("detail-body");
    let d;
    try {
      const answer = await fetch("exchange?id=" + row.id + (row.endN ? "&end=" + row.endN : ""), { cache: "no-store" });
      d = await answer.json();
      if (!answer.ok) throw new Error(d.reason || d.error || String(answer.status));
    } catch (e) {
      if (token !== detailToken) return;
      body.textContent = "";
      body.appendChild(el("div", "problem", "Could not fetch this exchange: " + e.message));
      return;
    }
    if (token !== detailToken) return;
    body.textContent = "";
    body.scrollTop = 0;
    renderDetail(body, d);
  }

  function select(row) {
    selected = row;
    schedule();
    showDetail(row);
  }

  function closeDetail() {
    selected = null;
    detailToken++;
    $("detail").hidden = true;
    document.querySelector("main").classList.remove("with-detail");
    $("detail-body").textContent = "";
    schedule();
  }

  // --- HAR ---------------------------------------------------------------
  function download(blob, name) {
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = name;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
  }

  function harAll() {
    const link = document.createElement("a");
    link.href = "network.har?upto=" + cursor;
    link.download = "network.har";
    document.body.appendChild(link);
    link.click();
    link.remove();
  }

  // The HAR of the rows shown: the export at the same cursor, its entries
  // kept when the filters show them.
  async function harShown() {
    // the rows the filters show once the box's expression has caught up
    await matchSettled;
    refilter();
    const upto = cursor;
    const ids = new Set(shown.map((row) => row.id));
    const button = $("har-shown");
    button.disabled = true;
    try {
      const answer = await fetch("network.har?upto=" + upto, { cache: "no-store" });
      if (!answer.ok) throw new Error("the API answered " + answer.status);
      const har = await answer.json();
      har.log.entries = har.log.entries.filter((entry) => ids.has(entry._id));
      download(new Blob([JSON.stringify(har)], { type: "application/json" }), "network-shown.har");
    } catch (e) {
      notice("The HAR could not be made: " + e.message);
    } finally {
      button.disabled = false;
    }
  }

  // --- wiring ------------------------------------------------------------
  $("filter-text").addEventListener("input", readFilters);
  for (const id of ["filter-status", "filter-kind", "filter-host"]) $(id).addEventListener("change", readFilters);
  $("detail-close").addEventListener("click", closeDetail);
  $("har-all").addEventListener("click", harAll);
  $("har-shown").addEventListener("click", harShown);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeDetail();
  });
  // For tests and scripts: what the page has read so far.
  window.netlogView = {
    cursor: () => cursor,
    rows: () => rows.length,
    shown: () => shown.map((row) => row.id),
    // resolves once what has been read and the filters as they stand are on
    // screen: a render asked for before this call runs first (animation
    // frame callbacks run in the order they were asked for), and one is
    // asked for in case nothing was pending
    rendered: () => matchSettled.then(() => new Promise((resolve) => {
      dirty = true;
      schedule();
      requestAnimationFrame(() => resolve(cursor));
    })),
    // the milliseconds the last renders took (up to 1,000 of them), emptied
    renderTimes: () => renderMs.splice(0),
    // [id, ms when its open line was read, end line's n, ms when that was read]
    seen: () => rows.map((row) => [row.id, row.seenOpen, row.endN, row.seenEnd]),
  };
  schedule();
  poll();
})();
