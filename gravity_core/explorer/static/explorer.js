// GRAVITY anchor explorer: entity graph, event timeline, topic arcs and a search box over them.
// Vanilla DOM and SVG, no network. Conversation text only ever reaches the page through
// textContent and setAttribute, never as markup.
(function () {
  "use strict";

  const DATA = JSON.parse(document.getElementById("gravity-data").textContent);
  const SVG_NS = "http://www.w3.org/2000/svg";
  const TYPE_COLORS = {
    person: "#4263eb", pet: "#f08c00", place: "#2f9e44", organization: "#e03131",
    activity: "#0c8599", object: "#e8590c", work: "#9c36b5", other: "#868e96",
  };
  const TOPIC_COLORS = ["#4263eb", "#2f9e44", "#e8590c", "#9c36b5", "#0c8599", "#e03131",
    "#f08c00", "#5c7cfa", "#37b24d", "#d6336c"];
  const MAX_LANES = 8;
  const LABELLED_NODES = 40;
  const MAX_EDGE_LABELS = 80; // beyond this, relation types show on hover only
  const SEARCH_DELAY_MS = DATA.entities.length + DATA.events.length + DATA.topics.length > 1500 ? 150 : 0;
  const SOURCES_SHOWN = 8;

  const entityById = new Map(DATA.entities.map((e) => [e.id, e]));
  const eventById = new Map(DATA.events.map((e) => [e.id, e]));
  const topicById = new Map(DATA.topics.map((t) => [t.id, t]));
  const sessionById = new Map(DATA.sessions.map((s) => [s.id, s]));
  const topicColor = new Map(DATA.topics.map((t, i) => [t.id, TOPIC_COLORS[i % TOPIC_COLORS.length]]));
  const incoming = new Map(); // entity id -> relations other entities hold towards it
  for (const e of DATA.entities) {
    for (const r of e.relations) {
      if (r.object_id && r.object_id !== e.id) {
        if (!incoming.has(r.object_id)) incoming.set(r.object_id, []);
        incoming.get(r.object_id).push({ from: e, relation: r });
      }
    }
  }

  const state = {
    terms: [],
    hidden: { entity: new Set(), event: new Set(), topic: new Set() },
    selection: null,
    activeTrails: new Set(),
  };

  // ---------- small DOM helpers ----------

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function s(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined && value !== false) node.setAttribute(key, String(value));
    }
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  function tooltip(text) {
    return s("title", {}, text);
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function plural(n, one, many) {
    return `${n} ${n === 1 ? one : many}`;
  }

  function truncate(text, n) {
    return text.length > n ? text.slice(0, n - 1) + "\u2026" : text;
  }

  function minMax(values) {
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of values) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    return [lo, hi];
  }

  function dayLabel(day) {
    const d = new Date(day * 86400000);
    return d.toLocaleDateString("en-GB", { month: "short", year: "numeric", timeZone: "UTC" });
  }

  // ---------- search ----------

  function parseTerms(query) {
    return query.toLowerCase().split(/\s+/).filter(Boolean);
  }

  function passes(item) {
    return state.terms.every((t) => item.search.includes(t));
  }

  function applySearch(query) {
    state.terms = parseTerms(query);
    for (const [kind, items] of [["entity", DATA.entities], ["event", DATA.events], ["topic", DATA.topics]]) {
      const hidden = state.hidden[kind];
      hidden.clear();
      for (const item of items) if (!passes(item)) hidden.add(item.id);
    }
    graph.filter();
    timeline.draw();
    topics.draw();
    updateCounts();
    document.body.dataset.query = query;
  }

  function updateCounts() {
    const panels = [
      ["entity-count", DATA.entities, "entity", "entities"],
      ["event-count", DATA.events, "event", "events"],
      ["topic-count", DATA.topics, "topic", "topics"],
    ];
    for (const [testid, items, one, many] of panels) {
      const kind = testid.split("-")[0];
      const shown = items.length - state.hidden[kind].size;
      const node = document.querySelector(`[data-testid="${testid}"]`);
      node.dataset.count = String(shown);
      node.dataset.total = String(items.length);
      node.textContent = shown === items.length ? plural(shown, one, many) : `${shown} of ${plural(items.length, one, many)}`;
    }
  }

  // ---------- entity graph ----------

  const graph = (function () {
    const svg = document.getElementById("graph");
    // Smaller nodes when there are many, so a large KB stays legible (zoom in for detail).
    const shrink = Math.min(1, Math.max(0.35, Math.sqrt(150 / Math.max(DATA.entities.length, 1))));
    const nodes = DATA.entities
      .map((e) => ({ id: e.id, entity: e, r: shrink * Math.min(26, 5 + 2.2 * Math.sqrt(Math.max(e.mentions, 1))) }))
      .sort((a, b) => b.entity.mentions - a.entity.mentions || (a.id < b.id ? -1 : 1));
    const nodeById = new Map(nodes.map((n) => [n.id, n]));
    const links = [];
    const seen = new Set();
    for (const e of DATA.entities) {
      for (const r of e.relations) {
        if (!r.object_id || r.object_id === e.id) continue;
        const key = `${e.id}\u0000${r.object_id}\u0000${r.relation}`;
        if (seen.has(key)) continue;
        seen.add(key);
        links.push({ source: nodeById.get(e.id), target: nodeById.get(r.object_id), kind: "relation", label: r.relation, weight: 1 });
      }
    }
    const maxCo = Math.max(1, minMax(DATA.entities.flatMap((e) => e.co.slice(0, 3).map((c) => c[1])))[1]);
    for (const e of DATA.entities) {
      for (const [other, count] of e.co.slice(0, 3)) {
        const key = e.id < other ? `${e.id}\u0000${other}` : `${other}\u0000${e.id}`;
        if (seen.has(key)) continue;
        seen.add(key);
        links.push({ source: nodeById.get(e.id), target: nodeById.get(other), kind: "co", label: `${count}`, weight: 0.15 + 0.35 * (count / maxCo) });
      }
    }
    let width = 900;
    let height = 440;
    let view = null;
    let home = null;
    const elements = new Map(); // entity id -> <g>

    function layout() {
      const n = nodes.length;
      if (!n) return;
      const cx = width / 2;
      const cy = height / 2;
      const k = Math.sqrt((width * height) / n) * 0.7;
      nodes.forEach((d, i) => {
        const radius = k * 0.45 * Math.sqrt(i + 0.5);
        const angle = i * 2.399963;
        d.x = cx + radius * Math.cos(angle);
        d.y = cy + radius * Math.sin(angle) * (height / width);
      });
      const iterations = n > 600 ? 120 : 260;
      let temperature = width / 8;
      const cooling = temperature / (iterations + 1);
      const cell = 2 * k;
      const gravity = 0.9 / Math.sqrt(n);
      for (let it = 0; it < iterations; it++) {
        for (const d of nodes) { d.dx = 0; d.dy = 0; }
        const grid = new Map();
        for (const d of nodes) {
          const key = `${Math.floor(d.x / cell)},${Math.floor(d.y / cell)}`;
          if (!grid.has(key)) grid.set(key, []);
          grid.get(key).push(d);
        }
        nodes.forEach((d, i) => {
          const gx = Math.floor(d.x / cell);
          const gy = Math.floor(d.y / cell);
          for (let ix = gx - 1; ix <= gx + 1; ix++) {
            for (let iy = gy - 1; iy <= gy + 1; iy++) {
              const bucket = grid.get(`${ix},${iy}`);
              if (!bucket) continue;
              for (const o of bucket) {
                if (o === d) continue;
                let dx = d.x - o.x;
                let dy = d.y - o.y;
                let dist = Math.sqrt(dx * dx + dy * dy);
                if (dist < 0.01) { dx = Math.cos(i); dy = Math.sin(i); dist = 1; }
                if (dist > cell) continue;
                const force = (k * k) / dist + (d.r + o.r) * 2;
                d.dx += (dx / dist) * force;
                d.dy += (dy / dist) * force;
              }
            }
          }
        });
        for (const l of links) {
          const dx = l.source.x - l.target.x;
          const dy = l.source.y - l.target.y;
          const dist = Math.max(0.01, Math.sqrt(dx * dx + dy * dy));
          const force = ((dist * dist) / k) * l.weight;
          l.source.dx -= (dx / dist) * force;
          l.source.dy -= (dy / dist) * force;
          l.target.dx += (dx / dist) * force;
          l.target.dy += (dy / dist) * force;
        }
        for (const d of nodes) {
          d.dx -= (d.x - cx) * gravity * k * 0.05;
          d.dy -= (d.y - cy) * gravity * k * 0.05 * (width / height);
          const len = Math.sqrt(d.dx * d.dx + d.dy * d.dy);
          if (len > 0) {
            const step = Math.min(len, temperature);
            d.x += (d.dx / len) * step;
            d.y += (d.dy / len) * step;
          }
        }
        temperature = Math.max(temperature - cooling, 0.5);
      }
      // Fit the layout into the canvas, leaving room for the largest nodes and their labels.
      const [x0, x1] = minMax(nodes.map((d) => d.x));
      const [y0, y1] = minMax(nodes.map((d) => d.y));
      const padX = 80;
      const padY = 36;
      const sx = x1 > x0 ? Math.min(3, (width - 2 * padX) / (x1 - x0)) : 1;
      const sy = y1 > y0 ? Math.min(3, (height - 2 * padY) / (y1 - y0)) : 1;
      for (const d of nodes) {
        d.x = x1 > x0 ? padX + (d.x - x0) * sx + (width - 2 * padX - (x1 - x0) * sx) / 2 : cx;
        d.y = y1 > y0 ? padY + (d.y - y0) * sy + (height - 2 * padY - (y1 - y0) * sy) / 2 : cy;
      }
    }

    function draw() {
      clear(svg);
      width = Math.max(svg.clientWidth, 300);
      height = Math.max(svg.clientHeight, 200);
      home = { x: 0, y: 0, w: width, h: height };
      view = { ...home };
      svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
      svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
      if (!nodes.length) {
        svg.append(s("text", { x: 16, y: 28, class: "axis-label" }, "No entities in this KB."));
        return;
      }
      layout();
      const relationCount = links.filter((l) => l.kind === "relation").length;
      const edgeLayer = s("g", { class: "edges" });
      const labelLayer = s("g", { class: "edge-labels" });
      for (const l of links) {
        l.element = s("line", {
          class: `edge ${l.kind}`, x1: l.source.x, y1: l.source.y, x2: l.target.x, y2: l.target.y,
          "stroke-width": l.kind === "co" ? (0.6 + 3 * l.weight).toFixed(2) : null,
          "data-testid": l.kind === "relation" ? "relation-edge" : "co-edge",
        }, tooltip(l.kind === "relation"
          ? `${l.source.entity.name} \u2014 ${l.label} \u2192 ${l.target.entity.name}`
          : `${l.source.entity.name} and ${l.target.entity.name}: mentioned together ${plural(Number(l.label), "time", "times")}`));
        edgeLayer.append(l.element);
        if (l.kind === "relation" && relationCount <= MAX_EDGE_LABELS) {
          // Midway along the part of the line that is not under either node.
          const dx = l.target.x - l.source.x;
          const dy = l.target.y - l.source.y;
          const dist = Math.max(Math.sqrt(dx * dx + dy * dy), 0.01);
          const along = l.source.r + Math.max(0, dist - l.source.r - l.target.r) / 2;
          l.labelElement = s("text", {
            class: "edge-label", x: l.source.x + (dx / dist) * along, y: l.source.y + (dy / dist) * along - 3, "text-anchor": "middle",
          }, l.label.replace(/_/g, " "));
          labelLayer.append(l.labelElement);
        }
      }
      const nodeLayer = s("g", { class: "nodes" });
      const labelled = new Set(nodes.slice(0, LABELLED_NODES).map((d) => d.id));
      for (const d of nodes) {
        const e = d.entity;
        const g = s("g", {
          class: `entity${e.speaker ? " speaker" : ""}`, "data-id": e.id, "data-testid": "entity",
          transform: `translate(${d.x.toFixed(1)},${d.y.toFixed(1)})`, tabindex: 0, role: "button",
          "aria-label": `${e.name} (${e.type})`,
        },
        s("circle", { class: "entity-node", r: d.r.toFixed(1), fill: TYPE_COLORS[e.type] || TYPE_COLORS.other }),
        tooltip(`${e.name} (${e.type}), ${plural(e.mentions, "mention", "mentions")}`));
        if (labelled.has(e.id) || e.speaker) {
          g.append(s("text", { class: "entity-label", x: 0, y: d.r + 12, "text-anchor": "middle" }, truncate(e.name, 28)));
        }
        g.addEventListener("click", () => select("entity", e.id));
        g.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select("entity", e.id); } });
        elements.set(e.id, g);
        nodeLayer.append(g);
      }
      svg.append(edgeLayer, labelLayer, nodeLayer);
      enablePanZoom();
      filter();
    }

    function setView() {
      svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
    }

    function toGraph(ev) {
      const box = svg.getBoundingClientRect();
      const scale = Math.max(view.w / box.width, view.h / box.height);
      const offsetX = (box.width * scale - view.w) / 2;
      const offsetY = (box.height * scale - view.h) / 2;
      return { x: view.x - offsetX + (ev.clientX - box.left) * scale, y: view.y - offsetY + (ev.clientY - box.top) * scale, scale };
    }

    function enablePanZoom() {
      if (svg.dataset.panZoom) return;
      svg.dataset.panZoom = "1";
      svg.addEventListener("wheel", (ev) => {
        ev.preventDefault();
        const p = toGraph(ev);
        const factor = Math.exp(Math.max(-0.5, Math.min(0.5, ev.deltaY * 0.0015)));
        const w = Math.min(home.w * 4, Math.max(home.w / 10, view.w * factor));
        const f = w / view.w;
        view = { x: p.x - (p.x - view.x) * f, y: p.y - (p.y - view.y) * f, w: view.w * f, h: view.h * f };
        setView();
      }, { passive: false });
      let drag = null;
      svg.addEventListener("pointerdown", (ev) => {
        if (ev.target.closest && ev.target.closest(".entity")) return;
        drag = { x: ev.clientX, y: ev.clientY, view: { ...view }, scale: toGraph(ev).scale };
        svg.classList.add("panning");
        svg.setPointerCapture(ev.pointerId);
      });
      svg.addEventListener("pointermove", (ev) => {
        if (!drag) return;
        view = { ...drag.view, x: drag.view.x - (ev.clientX - drag.x) * drag.scale, y: drag.view.y - (ev.clientY - drag.y) * drag.scale };
        setView();
      });
      const stop = () => { drag = null; svg.classList.remove("panning"); };
      svg.addEventListener("pointerup", stop);
      svg.addEventListener("pointercancel", stop);
      svg.addEventListener("dblclick", () => { view = { ...home }; setView(); });
    }

    function filter() {
      const hidden = state.hidden.entity;
      for (const [id, g] of elements) g.classList.toggle("filtered", hidden.has(id));
      for (const l of links) {
        const off = hidden.has(l.source.id) || hidden.has(l.target.id);
        l.element.classList.toggle("filtered", off);
        if (l.labelElement) l.labelElement.classList.toggle("filtered", off);
      }
    }

    function highlight(entityIds, selectedId) {
      const dim = entityIds.size > 0 || selectedId !== null;
      svg.classList.toggle("dimmed", dim);
      for (const [id, g] of elements) {
        g.classList.toggle("selected", id === selectedId);
        g.classList.toggle("related", entityIds.has(id) && id !== selectedId);
      }
      for (const l of links) {
        const on = selectedId !== null && (l.source.id === selectedId || l.target.id === selectedId);
        if (l.element) l.element.classList.toggle("related", on);
      }
    }

    function neighbours(id) {
      const out = new Set();
      for (const l of links) {
        if (l.source.id === id) out.add(l.target.id);
        if (l.target.id === id) out.add(l.source.id);
      }
      return out;
    }

    return { draw, filter, highlight, neighbours };
  })();

  // ---------- event timeline ----------

  const timeline = (function () {
    const svg = document.getElementById("timeline");
    const LABEL_W = 118;
    const GUTTER_W = 64;
    const ROW_H = 13;
    const AXIS_H = 30;
    const LANE_PAD = 6;
    const MIN_W = 9;
    const items = new Map(); // event id -> {event, g, x0, x1, y}
    let trailLayer = null;

    function laneKey(e) {
      if (e.who_ids.length) return `id:${e.who_ids[0]}`;
      if (e.who.length) return `who:${e.who[0].toLowerCase()}`;
      return "none";
    }

    function laneName(key, e) {
      if (key === "none") return "(no participant)";
      if (key === "others") return "others";
      if (key.startsWith("id:")) return entityById.get(key.slice(3)).name;
      return e.who[0];
    }

    function trailOrder(members) {
      // Follow the prev/next links the builder wrote; anything left over goes by date.
      const inTrail = new Map(members.map((m) => [m.event.id, m]));
      const ordered = [];
      const done = new Set();
      const sorted = members.slice().sort((a, b) => a.event.start_day - b.event.start_day);
      for (const head of sorted) {
        if (done.has(head.event.id)) continue;
        if (head.link.prev && inTrail.has(head.link.prev) && !done.has(head.link.prev)) continue;
        let cur = head;
        while (cur && !done.has(cur.event.id)) {
          done.add(cur.event.id);
          ordered.push(cur.event);
          cur = cur.link.next ? inTrail.get(cur.link.next) : null;
        }
      }
      for (const m of sorted) if (!done.has(m.event.id)) { done.add(m.event.id); ordered.push(m.event); }
      return ordered;
    }

    const trails = new Map(); // trail key -> events in order
    (function collectTrails() {
      const members = new Map();
      for (const e of DATA.events) {
        for (const link of e.trails) {
          if (!members.has(link.trail)) members.set(link.trail, []);
          members.get(link.trail).push({ event: e, link });
        }
      }
      for (const [key, list] of members) trails.set(key, trailOrder(list));
    })();

    let frame = null; // the axis and lane order, from all events: filtering keeps them still

    function makeFrame(events) {
      const width = Math.max(svg.parentNode.clientWidth - 2, 640);
      // The axis spans the conversation's sessions (plus a quarter of that span either side, if
      // events fall there); events further away sit in "earlier" / "later" gutters.
      const [firstStart] = minMax(events.map((e) => e.start_day));
      const [, lastEnd] = minMax(events.map((e) => e.end_day));
      let lo = firstStart;
      let hi = lastEnd;
      if (DATA.sessions.length) {
        const [s0, s1] = minMax(DATA.sessions.map((x) => x.day));
        const span = Math.max(s1 - s0, 30);
        lo = Math.max(s0 - 0.25 * span, Math.min(s0, firstStart));
        hi = Math.min(s1 + 0.25 * span, Math.max(s1, lastEnd));
      }
      lo -= 2;
      hi += 2;
      const hasEarlier = events.some((e) => e.end_day < lo);
      const hasLater = events.some((e) => e.start_day > hi);
      const plotX0 = LABEL_W + (hasEarlier ? GUTTER_W : 0) + 6;
      const plotX1 = width - (hasLater ? GUTTER_W : 0) - 10;
      // Lanes: one per main participant (the busiest ones), the rest together.
      const counts = new Map();
      for (const e of events) counts.set(laneKey(e), (counts.get(laneKey(e)) || 0) + 1);
      const ranked = [...counts.entries()].sort((a, b) => b[1] - a[1]).map((c) => c[0]);
      const own = new Set(ranked.slice(0, ranked.length > MAX_LANES ? MAX_LANES - 1 : MAX_LANES));
      const laneOf = (e) => (own.has(laneKey(e)) ? laneKey(e) : "others");
      const rank = (key) => (key === "others" ? Infinity : ranked.indexOf(key));
      return { width, lo, hi, hasEarlier, hasLater, plotX0, plotX1, laneOf, rank };
    }

    function draw() {
      clear(svg);
      items.clear();
      const width = frame ? frame.width : Math.max(svg.parentNode.clientWidth - 2, 640);
      const message = (text) => {
        svg.setAttribute("width", width);
        svg.setAttribute("height", 30);
        svg.removeAttribute("viewBox");
        svg.append(s("text", { x: 8, y: 20, class: "axis-label" }, text));
      };
      if (!DATA.events.length) { message("No events in this KB."); return; }
      if (!frame) frame = makeFrame(DATA.events);
      const events = DATA.events.filter((e) => !state.hidden.event.has(e.id))
        .sort((a, b) => a.start_day - b.start_day || a.end_day - b.end_day || (a.id < b.id ? -1 : 1));
      if (!events.length) { message("No event matches the filter."); return; }
      const { lo, hi, hasEarlier, hasLater, plotX0, plotX1 } = frame;
      const x = (day) => plotX0 + ((day - lo) / (hi - lo)) * (plotX1 - plotX0);
      const lanes = new Map();
      for (const e of events) {
        const key = frame.laneOf(e);
        if (!lanes.has(key)) lanes.set(key, { key, name: laneName(key, e), rows: [], placed: [] });
        const lane = lanes.get(key);
        let x0;
        let x1;
        if (e.end_day < lo || e.start_day > hi) {
          const gutterX = e.end_day < lo ? LABEL_W : plotX1 + 10;
          const slot = lane.placed.filter((p) => p === gutterX).length % 4;
          x0 = gutterX + 6 + slot * 13;
          x1 = x0 + MIN_W;
          lane.placed.push(gutterX);
        } else {
          x0 = x(Math.max(e.start_day, lo));
          x1 = Math.max(x(Math.min(e.end_day + 1, hi)), x0 + MIN_W);
        }
        let row = lane.rows.findIndex((right) => right + 2 <= x0);
        if (row < 0) { row = lane.rows.length; lane.rows.push(0); }
        lane.rows[row] = x1;
        items.set(e.id, { event: e, lane, row, x0, x1 });
      }
      const orderedLanes = [...lanes.values()].sort((a, b) => frame.rank(a.key) - frame.rank(b.key));
      let top = AXIS_H;
      for (const lane of orderedLanes) {
        lane.top = top;
        lane.height = LANE_PAD * 2 + Math.max(1, lane.rows.length) * ROW_H;
        top += lane.height;
      }
      const height = top + 6;
      svg.setAttribute("width", width);
      svg.setAttribute("height", height);
      svg.setAttribute("viewBox", `0 0 ${width} ${height}`);

      const back = s("g", { class: "lanes" });
      orderedLanes.forEach((lane, i) => {
        back.append(s("rect", { class: `lane-bg${i % 2 ? " odd" : ""}`, x: 0, y: lane.top, width, height: lane.height }));
        back.append(s("text", { class: "lane-label", x: 8, y: lane.top + 16 }, truncate(lane.name, 17), tooltip(lane.name)));
      });
      if (hasEarlier) {
        back.append(s("rect", { class: "gutter-bg", x: LABEL_W, y: AXIS_H, width: GUTTER_W, height: top - AXIS_H }));
        back.append(s("text", { class: "axis-label", x: LABEL_W + 6, y: 14 }, "\u25c2 earlier"));
      }
      if (hasLater) {
        back.append(s("rect", { class: "gutter-bg", x: plotX1 + 10, y: AXIS_H, width: GUTTER_W, height: top - AXIS_H }));
        back.append(s("text", { class: "axis-label", x: plotX1 + 14, y: 14 }, "later \u25b8"));
      }
      // Month ticks, thinned so labels do not collide.
      const monthStarts = [];
      const d = new Date(Math.ceil(lo) * 86400000);
      let y = d.getUTCFullYear();
      let m = d.getUTCMonth() + 1;
      for (;;) {
        if (m > 11) { m = 0; y += 1; }
        const day = Date.UTC(y, m, 1) / 86400000;
        if (day > hi) break;
        monthStarts.push(day);
        m += 1;
      }
      const every = Math.max(1, Math.ceil((monthStarts.length * 70) / Math.max(plotX1 - plotX0, 1)));
      monthStarts.forEach((day, i) => {
        if (i % every) return;
        back.append(s("line", { class: "axis-tick", x1: x(day), x2: x(day), y1: AXIS_H - 12, y2: top }));
        back.append(s("text", { class: "axis-label", x: x(day) + 3, y: 14 }, dayLabel(day)));
      });
      for (const session of DATA.sessions) {
        if (session.day < lo || session.day > hi) continue;
        const sx = x(session.day);
        back.append(s("path", { class: "session-mark", d: `M${sx - 4},${AXIS_H - 10} L${sx + 4},${AXIS_H - 10} L${sx},${AXIS_H - 3} Z` },
          tooltip(`${session.id}, ${session.date}`)));
      }
      trailLayer = s("g", { class: "trails" });
      const front = s("g", { class: "events" });
      for (const item of items.values()) {
        const e = item.event;
        item.y = item.lane.top + LANE_PAD + item.row * ROW_H;
        const basis = e.when && e.when.basis === "phrase" && e.when.start ? "phrase" : "mention";
        item.g = s("g", { class: `event-item basis-${basis}`, "data-id": e.id, "data-testid": "event-item", tabindex: 0, role: "button" },
          s("rect", { x: item.x0.toFixed(1), y: item.y, width: (item.x1 - item.x0).toFixed(1), height: ROW_H - 4, rx: 4.5 }),
          tooltip(`${e.date}: ${e.who.join(", ") || "someone"} \u2014 ${e.what}`));
        item.g.addEventListener("click", () => select("event", e.id));
        item.g.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select("event", e.id); } });
        front.append(item.g);
      }
      svg.append(back, trailLayer, front);
      paint();
    }

    function drawTrails() {
      if (!trailLayer) return;
      clear(trailLayer);
      for (const [key, events] of trails) {
        const active = state.activeTrails.has(key);
        if (!active && !key.startsWith("who:")) continue;
        const points = events
          .filter((e) => items.has(e.id))
          .map((e) => items.get(e.id))
          .map((it) => `${(it.x0 + 4.5).toFixed(1)},${(it.y + (ROW_H - 4) / 2).toFixed(1)}`);
        if (points.length < 2) continue;
        trailLayer.append(s("path", { class: `trail${active ? " active" : ""}`, "data-trail": key, d: `M${points.join(" L")}` }));
      }
    }

    let marked = { eventIds: new Set(), selectedId: null };

    function paint() {
      for (const [id, item] of items) {
        item.g.classList.toggle("selected", id === marked.selectedId);
        item.g.classList.toggle("related", marked.eventIds.has(id) && id !== marked.selectedId);
      }
      drawTrails();
    }

    function highlight(eventIds, selectedId) {
      marked = { eventIds, selectedId };
      paint();
      const target = selectedId !== null ? items.get(selectedId) : null;
      if (target && target.g.scrollIntoView) target.g.scrollIntoView({ block: "nearest", inline: "nearest" });
    }

    function resize() {
      frame = null;
      draw();
    }

    return { draw, highlight, resize, trails };
  })();

  // ---------- topic arcs ----------

  const topics = (function () {
    const svg = document.getElementById("topics");
    const LABEL_W = 190;
    const COL_MIN = 34;
    const ROW_H = 20;
    const HEAD_H = 34;
    const rows = new Map(); // topic id -> <g>

    function firstIndex(t) {
      const found = t.sessions.map((id) => sessionById.get(id)).filter(Boolean).map((x) => x.index);
      return found.length ? Math.min(...found) : Infinity;
    }

    function draw() {
      clear(svg);
      rows.clear();
      const sessions = DATA.sessions;
      const shown = DATA.topics.filter((t) => !state.hidden.topic.has(t.id));
      const width = Math.max(svg.parentNode.clientWidth - 2, LABEL_W + sessions.length * COL_MIN + 20, 480);
      if (!DATA.topics.length || !sessions.length) {
        svg.setAttribute("width", width);
        svg.setAttribute("height", 30);
        svg.append(s("text", { x: 8, y: 20, class: "axis-label" }, "No topics in this KB."));
        return;
      }
      const col = (width - LABEL_W - 20) / sessions.length;
      const cx = (i) => LABEL_W + col * (i + 0.5);
      const height = HEAD_H + Math.max(shown.length, 1) * ROW_H + 8;
      svg.setAttribute("width", width);
      svg.setAttribute("height", height);
      svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
      const head = s("g", { class: "sessions" });
      for (const session of sessions) {
        const sx = cx(session.index);
        head.append(s("line", { class: "session-col", x1: sx, x2: sx, y1: HEAD_H - 4, y2: height }));
        head.append(s("text", { class: "session-label", x: sx, y: 13, "text-anchor": "middle" }, `S${session.index + 1}`,
          tooltip(`${session.id}, ${session.date}`)));
        if (col >= 48) {
          head.append(s("text", { class: "session-label", x: sx, y: 26, "text-anchor": "middle" }, session.date.replace(/ \d{4}$/, "")));
        }
      }
      svg.append(head);
      if (!shown.length) {
        svg.append(s("text", { x: 8, y: HEAD_H + 14, class: "axis-label" }, "No topic matches the filter."));
        return;
      }
      const ordered = shown.slice().sort((a, b) => firstIndex(a) - firstIndex(b) || b.sessions.length - a.sessions.length || (a.id < b.id ? -1 : 1));
      ordered.forEach((t, i) => {
        const y = HEAD_H + i * ROW_H + ROW_H / 2;
        const indices = [...t.sessions, ...t.arc.map((a) => a.session)]
          .map((id) => sessionById.get(id)).filter(Boolean).map((x) => x.index);
        const [i0, i1] = indices.length ? minMax(indices) : [0, 0];
        const color = topicColor.get(t.id);
        const g = s("g", { class: "topic-row", "data-id": t.id, "data-testid": "topic-row", tabindex: 0, role: "button" },
          s("text", { class: "topic-label", x: 8, y: y + 4 }, truncate(t.label, 28),
            tooltip(`${t.label}${t.keywords.length ? " \u2014 " + t.keywords.join(", ") : ""}`)),
          s("rect", { class: "topic-bar", "data-testid": "topic-bar", x: cx(i0) - col * 0.4, y: y - 6, width: cx(i1) - cx(i0) + col * 0.8, height: 12, rx: 6, fill: color },
            tooltip(`${t.label}: ${plural(t.sessions.length, "session", "sessions")}`)));
        for (const snapshot of t.arc) {
          const session = sessionById.get(snapshot.session);
          if (!session) continue;
          const dot = s("circle", { class: "topic-seg", "data-testid": "topic-seg", cx: cx(session.index), cy: y, r: 5, fill: color },
            tooltip(`${session.id}, ${snapshot.date}: ${snapshot.summary}`));
          dot.addEventListener("click", (ev) => { ev.stopPropagation(); select("topic", t.id, snapshot.session); });
          g.append(dot);
        }
        g.addEventListener("click", () => select("topic", t.id));
        g.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select("topic", t.id); } });
        rows.set(t.id, g);
        svg.append(g);
      });
      highlight();
    }

    function highlight() {
      const selected = state.selection && state.selection.kind === "topic" ? state.selection.id : null;
      for (const [id, g] of rows) g.classList.toggle("selected", id === selected);
    }

    return { draw, highlight };
  })();

  // ---------- details panel ----------

  const details = document.getElementById("details");

  function link(text, kind, id, extra) {
    const button = h("button", { type: "button", class: "link", "data-kind": kind, "data-id": id }, text);
    button.addEventListener("click", () => select(kind, id, extra));
    return button;
  }

  function badge(text, color) {
    const node = h("span", { class: "badge" }, text);
    node.style.background = color;
    return node;
  }

  function utteranceTip(id) {
    const u = DATA.utterances[id];
    return u ? `${u.speaker} (${u.date}): ${u.text}` : id;
  }

  function sourceChips(ids) {
    return h("span", { class: "chips" }, ids.slice(0, 6).map((id) => h("span", { class: "src", title: utteranceTip(id) }, id)),
      ids.length > 6 ? h("span", { class: "src", title: ids.slice(6).join(", ") }, `+${ids.length - 6}`) : null);
  }

  function quotes(ids) {
    const unique = [...new Set(ids)].filter((id) => DATA.utterances[id]);
    const box = h("div", { class: "quotes", "data-testid": "provenance" });
    const render = (limit) => {
      clear(box);
      for (const id of unique.slice(0, limit)) {
        const u = DATA.utterances[id];
        box.append(h("div", { class: "quote" }, h("span", { class: "uid" }, `${id} \u00b7 ${u.date}`), h("br"),
          h("span", { class: "who" }, `${u.speaker}: `), u.text));
      }
      if (unique.length > limit) {
        const more = h("button", { type: "button", class: "link" }, `show all ${unique.length} utterances`);
        more.addEventListener("click", () => render(unique.length));
        box.append(more);
      }
    };
    render(SOURCES_SHOWN);
    return box;
  }

  function row(key, ...value) {
    return h("tr", {}, h("td", { class: "k" }, key), h("td", {}, ...value));
  }

  function entityLinks(names, ids) {
    return names.map((name, i) => {
      const id = ids[i] !== undefined && entityById.has(ids[i]) ? ids[i] : (DATA.entities.find((e) => e.name === name) || {}).id;
      return [i ? ", " : "", id ? link(name, "entity", id) : name];
    });
  }

  function showEntity(e) {
    const color = TYPE_COLORS[e.type] || TYPE_COLORS.other;
    // Surest first; equally sure values keep the order they were said in.
    const current = e.attributes.filter((a) => a.current)
      .map((a, i) => [a, i]).sort((x, y) => y[0].confidence - x[0].confidence || y[0].mentions - x[0].mentions || x[1] - y[1])
      .map((x) => x[0]);
    const past = e.attributes.filter((a) => !a.current);
    const attrRow = (a, isPast) => h("tr", { class: isPast ? "past" : null, "data-testid": "attribute" },
      h("td", { class: "k" }, a.name.replace(/_/g, " ")),
      h("td", {}, a.value, isPast ? " (earlier)" : null, h("br"),
        h("span", { class: "meta" }, `confidence ${a.confidence.toFixed(2)} \u00b7 ${plural(a.mentions, "mention", "mentions")} \u00b7 ${a.first_seen}${a.last_seen !== a.first_seen ? " to " + a.last_seen : ""} `),
        sourceChips(a.sources)));
    const relations = e.relations.map((r) => h("li", {}, h("span", { class: "change" }, r.relation.replace(/_/g, " ")), " \u2192 ",
      r.object_id ? link(r.object, "entity", r.object_id) : r.object, r.time ? ` (${r.time})` : null, " ", sourceChips(r.sources)));
    const inbound = (incoming.get(e.id) || []).map(({ from, relation }) => h("li", {}, link(from.name, "entity", from.id), " ",
      h("span", { class: "change" }, relation.relation.replace(/_/g, " ")), ` \u2192 ${e.name} `, sourceChips(relation.sources)));
    const provenance = [...e.attributes, ...e.relations, ...e.transitions].flatMap((x) => x.sources);
    append(details, [
      h("h3", { "data-testid": "details-title" }, e.name),
      h("p", {}, badge(e.type, color), e.speaker ? badge("speaker", "#343a40") : null),
      e.aliases.length ? h("p", { class: "meta" }, `also: ${e.aliases.join(", ")}`) : null,
      h("p", { class: "meta" }, `${plural(e.mentions, "mention", "mentions")}, first ${e.first_seen}, last ${e.last_seen}`),
      h("h4", {}, `Attributes (${current.length} current${past.length ? `, ${past.length} earlier` : ""})`),
      e.attributes.length ? h("table", {}, current.map((a) => attrRow(a, false)), past.map((a) => attrRow(a, true))) : h("p", { class: "empty" }, "none recorded"),
      h("h4", {}, `State changes (${e.transitions.length})`),
      e.transitions.length
        ? h("ul", { "data-testid": "transitions" }, e.transitions.map((t) => h("li", {},
          `${t.attribute.replace(/_/g, " ")}: `, h("span", { class: "change" }, `${t.old} \u2192 ${t.new}`), ` (${t.when}) `, sourceChips(t.sources))))
        : h("p", { class: "empty" }, "none recorded"),
      h("h4", {}, `Relations (${relations.length + inbound.length})`),
      relations.length || inbound.length ? h("ul", {}, relations, inbound) : h("p", { class: "empty" }, "none recorded"),
      e.co.length ? [h("h4", {}, "Mentioned together with"),
        h("p", {}, e.co.slice(0, 12).map(([id, n], i) => [i ? ", " : "", link(entityById.get(id).name, "entity", id), ` (${n})`]))] : null,
      h("h4", {}, `Events (${e.events.length})`),
      e.events.length ? eventList(e.events) : h("p", { class: "empty" }, "none recorded"),
      provenance.length ? [h("h4", {}, "Said in"), quotes(provenance)] : null,
    ]);
  }

  function eventList(ids) {
    const sorted = ids.map((id) => eventById.get(id)).filter(Boolean).sort((a, b) => a.start_day - b.start_day);
    const list = h("ul", {});
    const render = (limit) => {
      clear(list);
      for (const ev of sorted.slice(0, limit)) list.append(h("li", {}, h("span", { class: "meta" }, `${ev.date}: `), link(ev.what, "event", ev.id)));
      if (sorted.length > limit) {
        const more = h("button", { type: "button", class: "link" }, `show all ${sorted.length}`);
        more.addEventListener("click", () => render(sorted.length));
        list.append(h("li", {}, more));
      }
    };
    render(15);
    return list;
  }

  function showEvent(e) {
    const when = e.when;
    const trailItems = e.trails.map((t) => {
      const order = timeline.trails.get(t.trail) || [];
      const prev = t.prev && eventById.get(t.prev);
      const next = t.next && eventById.get(t.next);
      return h("li", {}, h("span", { class: "change" }, t.trail), ` (${plural(order.length, "event", "events")}): `,
        prev ? ["\u2190 ", link(truncate(prev.what, 40), "event", prev.id)] : "start",
        " | ",
        next ? [link(truncate(next.what, 40), "event", next.id), " \u2192"] : "end");
    });
    const topic = e.topic_id && topicById.get(e.topic_id);
    append(details, [
      h("h3", { "data-testid": "details-title" }, e.what),
      h("p", {}, badge("event", "#1c7ed6"), badge(when && when.basis === "phrase" && when.start ? "dated by a time phrase" : "dated by the day it was mentioned", "#495057")),
      h("table", {},
        row("who", ...(e.who.length ? entityLinks(e.who, e.who_ids) : ["(not named)"])),
        row("what", e.what),
        row("when", e.date),
        when ? row("time phrase", when.raw ? `\u201c${when.raw}\u201d` : "(none: the day it was mentioned)") : null,
        when && when.start ? row("interval", `${when.start}${when.end !== when.start ? " to " + when.end : ""}${when.granularity ? ` (${when.granularity})` : ""}`) : null,
        when && when.reference ? row("resolved against", when.reference) : null,
        row("where", e.where || "\u2014"),
        row("outcome", e.outcome || "\u2014"),
        row("said", `${e.said_at}, ${e.session}`),
        topic ? row("topic", link(topic.label, "topic", topic.id)) : null),
      h("h4", {}, "Trails"),
      trailItems.length ? h("ul", {}, trailItems) : h("p", { class: "empty" }, "in no trail"),
      h("h4", {}, "Said in"), quotes(e.sources),
    ]);
  }

  function showTopic(t, session) {
    const sessionIds = t.arc.map((a) => a.session);
    append(details, [
      h("h3", { "data-testid": "details-title" }, t.label),
      h("p", {}, badge("topic", topicColor.get(t.id)), badge(plural(t.sessions.length, "session", "sessions"), "#495057")),
      t.keywords.length ? h("p", { class: "meta" }, `keywords: ${t.keywords.join(", ")}`) : null,
      t.participants.length ? h("p", { class: "meta" }, "participants: ", entityLinks(t.participants, [])) : null,
      h("h4", {}, "Arc"),
      h("div", {}, t.arc.map((a) => h("div", { class: `arc-item${a.session === session ? " current" : ""}`, "data-testid": "arc-item" },
        h("span", { class: "meta" }, `${a.session} \u00b7 ${a.date} `), sourceChips(a.sources), h("br"), a.summary))),
      t.key_facts.length ? [h("h4", {}, "Key facts"), h("ul", {}, t.key_facts.map((f) => h("li", {}, f.text, " ", sourceChips(f.sources))))] : null,
      h("h4", {}, `Events (${t.events.length})`),
      t.events.length ? eventList(t.events) : h("p", { class: "empty" }, "none recorded"),
      sessionIds.length ? null : h("p", { class: "empty" }, "no session snapshots"),
    ]);
  }

  // ---------- selection ----------

  function select(kind, id, extra) {
    state.selection = { kind, id };
    clear(details);
    details.dataset.kind = kind;
    details.dataset.id = id;
    let entityIds = new Set();
    let eventIds = new Set();
    state.activeTrails = new Set();
    if (kind === "entity") {
      const e = entityById.get(id);
      showEntity(e);
      entityIds = graph.neighbours(id);
      eventIds = new Set(e.events);
      if (timeline.trails.has(`who:${id}`)) state.activeTrails.add(`who:${id}`);
      graph.highlight(entityIds, id);
    } else if (kind === "event") {
      const e = eventById.get(id);
      showEvent(e);
      entityIds = new Set(e.who_ids);
      for (const t of e.trails) state.activeTrails.add(t.trail);
      graph.highlight(entityIds, null);
    } else {
      const t = topicById.get(id);
      showTopic(t, extra);
      eventIds = new Set(t.events);
      state.activeTrails.add(`topic:${id}`);
      for (const ev of t.events) for (const x of eventById.get(ev).who_ids) entityIds.add(x);
      graph.highlight(entityIds, null);
    }
    timeline.highlight(eventIds, kind === "event" ? id : null);
    topics.highlight();
    details.scrollTop = 0;
  }

  // ---------- start ----------

  function legend() {
    const box = document.getElementById("graph-legend");
    const used = new Set(DATA.entities.map((e) => e.type));
    for (const [type, color] of Object.entries(TYPE_COLORS)) {
      if (!used.has(type)) continue;
      const swatch = h("span", { class: "swatch" });
      swatch.style.background = color;
      box.append(h("span", {}, swatch, type));
    }
    box.append(h("span", {}, "lines: dark = typed relation, grey = mentioned together; scroll to zoom, drag to pan"));
    const tl = document.getElementById("timeline-legend");
    const phrase = h("span", { class: "swatch square" });
    phrase.style.background = "#1c7ed6";
    tl.append(h("span", {}, phrase, "dated by a time phrase"),
      h("span", {}, h("span", { class: "swatch square hollow" }), "dated by the day it was mentioned"),
      h("span", {}, "\u25be sessions; grey lines: each participant's trail"));
  }

  function header() {
    const st = DATA.stats;
    document.getElementById("kb-title").textContent = DATA.title;
    document.title = `GRAVITY anchors: ${DATA.title}`;
    const build = [DATA.build.extractor, DATA.build.model, DATA.build.embedder].filter(Boolean).join(", ");
    const line = document.getElementById("kb-stats");
    if (build) line.title = `built with ${build}`;
    line.textContent = [
      plural(st.utterances, "utterance", "utterances"), plural(st.sessions, "session", "sessions"),
      `${plural(st.events, "event", "events")} (${st.events_dated_by_phrase} dated by a phrase)`,
      `${plural(st.topics, "topic", "topics")} (${st.topics_multi_session} across sessions)`,
      `${plural(st.entities, "entity", "entities")} (${plural(st.state_transitions, "state change", "state changes")})`,
    ].join(" \u00b7 ");
  }

  function start() {
    header();
    legend();
    graph.draw();
    timeline.draw();
    topics.draw();
    updateCounts();
    document.body.dataset.query = "";
    const search = document.getElementById("search");
    let pending = null;
    search.addEventListener("input", () => {
      // A large KB redraws in a few hundred milliseconds: wait for a pause in typing.
      clearTimeout(pending);
      if (SEARCH_DELAY_MS) pending = setTimeout(() => applySearch(search.value), SEARCH_DELAY_MS);
      else applySearch(search.value);
    });
    search.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") { clearTimeout(pending); search.value = ""; applySearch(""); }
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "/" && document.activeElement !== search) { ev.preventDefault(); search.focus(); }
    });
    let resizing = null;
    window.addEventListener("resize", () => {
      // The graph scales with its viewBox; the timeline and the arcs are laid out again.
      clearTimeout(resizing);
      resizing = setTimeout(() => { timeline.resize(); topics.draw(); }, 200);
    });
    document.body.dataset.ready = "1";
  }

  start();
})();
