-- The style sheet and the drawing script of the memory report, inlined into
-- the page so that it is one file that needs no network. The script reads
-- the JSON in <script id="lt-memory-data"> and draws, for each device, a
-- stacked step-area chart of allocated bytes by category as inline SVG: one
-- <path class="area" data-category=...> per category that ever held bytes
-- (garbage, bytes a collection freed later, on top), reserved bytes as a
-- dashed <path class="reserved">,
-- the marks as dashed lines with their labels, the peak, and a hover readout.
-- When done it sets data-chart="drawn" on <body> (the tests look for it).

local assets = {}

-- Fixed colours: a category has the same colour in every report.
assets.colours = {
  parameter = "#4e79a7",
  gradient = "#f28e2b",
  optimizer = "#59a14f",
  activation = "#e15759",
  other = "#9d8fb8",
  workspace = "#8c8c8c",
  garbage = "#e8c547", -- freed later by a collection: unreachable, still allocated
}
assets.reserved_colour = "#0a7f8c" -- no category's colour, nor the text's

-- The report's own rules, after lt.html_page's base style.
assets.css = [[
.panel { padding: 16px 18px; margin-bottom: 18px; }
.note { background: #fff8c5; border: 1px solid #e5d07a; border-radius: 8px; padding: 10px 14px; margin-bottom: 18px; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 0 0 8px; padding: 0; list-style: none; }
.legend li { display: flex; align-items: center; gap: 6px; }
.legend li.empty { opacity: .45; }
.legend .bytes { color: #656d76; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 3px; flex: none; }
.chart { position: relative; }
.axis-switch { text-align: right; color: #656d76; font-size: 12px; margin-bottom: -4px; }
.axis-switch button { font: inherit; color: #24292f; background: #f6f8fa; border: 1px solid #d0d7de; padding: 2px 9px; cursor: pointer; }
.axis-switch button:first-of-type { border-radius: 6px 0 0 6px; }
.axis-switch button:last-of-type { border-radius: 0 6px 6px 0; border-left: none; }
.axis-switch button[aria-pressed="true"] { background: #24292f; color: #fff; border-color: #24292f; }
.chart svg { display: block; width: 100%; height: auto; font-size: 12px; }
.chart .axis text { fill: #656d76; }
.chart .grid line { stroke: #e6e9ed; }
.chart .axis-title { fill: #424a53; font-weight: 600; }
.chart .area { stroke-width: .8; fill-opacity: .88; }
.chart .mark line { stroke: #24292f; stroke-dasharray: 4 3; stroke-width: 1; }
.chart .mark text { fill: #24292f; font-weight: 600; }
.chart .mark rect { fill: #fff; fill-opacity: .85; }
.chart .peak circle { fill: #fff; stroke: #cf222e; stroke-width: 2; }
.chart .peak text { fill: #cf222e; font-weight: 600; }
.chart .reserved { fill: none; stroke-width: 2; stroke-dasharray: 7 3; }
.chart .cursor { stroke: #57606a; stroke-width: 1; }
.tooltip { position: absolute; pointer-events: none; background: rgba(255,255,255,.97); border: 1px solid #d0d7de;
  border-radius: 6px; padding: 6px 9px; font-size: 12px; box-shadow: 0 2px 8px rgba(0,0,0,.12); white-space: nowrap; }
.tooltip td { padding: 0 4px; }
.tooltip td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.top { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
table.top th { text-align: left; color: #656d76; font-weight: 600; font-size: 12px; border-bottom: 1px solid #d8dee4; padding: 6px 8px; }
table.top td { border-bottom: 1px solid #eef1f4; padding: 5px 8px; }
table.top td.num, table.top th.num { text-align: right; }
table.top td.origin { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
table.top tr:hover td { background: #f6f8fa; }
.muted { color: #8c959f; }
pre.summary { margin: 0; overflow-x: auto; font: 12px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; }
footer { color: #8c959f; font-size: 12px; margin-top: 8px; }
]]

assets.script = [==[
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("lt-memory-data").textContent);
  var W = 1100, H = 400, M = { left: 76, right: 28, top: 46, bottom: 48 };

  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }

  var UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
  function human(bytes) {
    var u = 0;
    while (Math.abs(bytes) >= 1024 && u < UNITS.length - 1) { bytes /= 1024; u++; }
    return u === 0 ? bytes + " B" : bytes.toFixed(1) + " " + UNITS[u];
  }

  // 1, 2 or 5 times a power of ten, near range / count.
  function niceStep(range, count) {
    var raw = range / count, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }

  // t in seconds, in the unit of step, with the decimals step needs.
  function formatTime(t, step) {
    var unit = step < 1e-4 ? [1e6, " µs"] : step < 0.1 ? [1e3, " ms"] : [1, " s"];
    var decimals = Math.max(0, -Math.floor(Math.log10(step * unit[0]) + 1e-9));
    return (t * unit[0]).toFixed(Math.min(decimals, 3)) + unit[1];
  }

  // The x axis: seconds since recording started, or the place in the log
  // (every event the same width: fast bursts stay readable).
  var AXES = {
    time: { of: function (p) { return p.t; }, max: function () { return Math.max(data.duration, 1e-6); },
      title: "time since lt.memory.record(true)", format: formatTime },
    order: { of: function (p) { return p.seq; }, max: function () { return Math.max(data.events, 1); },
      title: "events since lt.memory.record(true)",
      format: function (v, step) { return "#" + v.toFixed(Math.max(0, -Math.floor(Math.log10(step) + 1e-9))); } }
  };

  function drawDevice(dev, root, axisName) {
    var ax = AXES[axisName];
    // Each point is [time, seq, bytes of each category in data.categories order].
    var pts = dev.points.map(function (p) {
      var b = {};
      data.categories.forEach(function (c, k) { b[c] = p[k + 2]; });
      return { t: p[0], seq: p[1], b: b };
    });
    var n = pts.length;
    var cats = data.categories.filter(function (c) {
      return pts.some(function (p) { return p.b[c] > 0; });
    });
    var xmax = ax.max();
    var peak = Math.max(dev.peak.bytes, dev.reservedPeak || 0, 1);
    var unitIndex = Math.min(Math.max(Math.floor(Math.log(peak) / Math.log(1024)), 0), 4);
    var unit = Math.pow(1024, unitIndex);
    var ystep = niceStep(peak / unit, 5) * unit;
    var ymax = Math.ceil(peak * 1.08 / ystep) * ystep;
    var pw = W - M.left - M.right, ph = H - M.top - M.bottom;
    function x(p) { return M.left + ax.of(p) / xmax * pw; }
    function y(b) { return M.top + ph - b / ymax * ph; }

    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
      "aria-label": "allocated memory on " + dev.device + " by category over time" }, root);
    var grid = el("g", { "class": "grid" }, svg), axis = el("g", { "class": "axis" }, svg);
    for (var b = 0; b <= ymax + ystep / 2; b += ystep) {
      el("line", { x1: M.left, x2: W - M.right, y1: y(b), y2: y(b) }, grid);
      el("text", { x: M.left - 8, y: y(b) + 4, "text-anchor": "end" }, axis).textContent =
        (b / unit).toFixed(b / unit % 1 ? 1 : 0);
    }
    var xstep = niceStep(xmax, 8);
    if (axisName === "order") xstep = Math.max(1, xstep);
    for (var v = 0; v <= xmax * 1.0001; v += xstep) {
      var tx = M.left + v / xmax * pw;
      el("line", { x1: tx, x2: tx, y1: M.top + ph, y2: M.top + ph + 5, stroke: "#8c959f" }, axis);
      el("text", { x: tx, y: M.top + ph + 19, "text-anchor": "middle" }, axis).textContent = ax.format(v, xstep);
    }
    el("line", { x1: M.left, x2: W - M.right, y1: y(0), y2: y(0), stroke: "#57606a" }, axis);
    el("text", { "class": "axis-title", x: 16, y: M.top + ph / 2, "text-anchor": "middle",
      transform: "rotate(-90 16 " + (M.top + ph / 2) + ")" }, svg).textContent = "allocated (" + UNITS[unitIndex] + ")";
    el("text", { "class": "axis-title", x: M.left + pw / 2, y: H - 8, "text-anchor": "middle" }, svg)
      .textContent = ax.title;

    // Stacked step areas: each value holds until the next point.
    var lower = pts.map(function () { return 0; });
    var areas = el("g", {}, svg), xend = M.left + pw;
    cats.forEach(function (c) {
      var upper = pts.map(function (p, i) { return lower[i] + p.b[c]; });
      var d = "M" + x(pts[0]) + "," + y(upper[0]);
      for (var i = 1; i < n; i++) d += "H" + x(pts[i]) + "V" + y(upper[i]);
      d += "H" + xend + "V" + y(lower[n - 1]);
      for (var j = n - 1; j >= 1; j--) d += "H" + x(pts[j]) + "V" + y(lower[j - 1]);
      d += "H" + x(pts[0]) + "Z";
      var path = el("path", { "class": "area", "data-category": c, d: d, fill: data.colours[c], stroke: data.colours[c] }, areas);
      el("title", {}, path).textContent = c;
      lower = upper;
    });

    // Reserved bytes (segments) as a line above the stacked allocated areas.
    if (dev.reserved) {
      var rd = "M" + x(pts[0]) + "," + y(dev.reserved[0]);
      for (var r = 1; r < n; r++) rd += "H" + x(pts[r]) + "V" + y(dev.reserved[r]);
      rd += "H" + xend;
      el("path", { "class": "reserved", d: rd, stroke: data.reservedColour }, svg);
    }

    // Marks: dashed lines, labels on alternating rows when they crowd.
    var marks = el("g", {}, svg), lastX = [-1e9, -1e9];
    data.marks.forEach(function (m) {
      var mx = x(m), row = mx - lastX[0] > 90 ? 0 : mx - lastX[1] > 90 ? 1 : 0;
      lastX[row] = mx;
      var g = el("g", { "class": "mark", "data-label": m.label }, marks);
      el("line", { x1: mx, x2: mx, y1: M.top - 14 - row * 16, y2: M.top + ph }, g);
      var label = el("text", { x: mx + 4, y: M.top - 18 - row * 16 }, g);
      label.textContent = m.label;
      if (mx + 4 + label.getComputedTextLength() > W - 2) { // no room on the right: put it on the left
        label.setAttribute("x", mx - 4);
        label.setAttribute("text-anchor", "end");
      }
    });

    // The peak, labelled on the side with room.
    var px = x(dev.peak), py = y(dev.peak.bytes);
    var pg = el("g", { "class": "peak" }, svg);
    el("circle", { cx: px, cy: py, r: 4.5 }, pg);
    var right = px < M.left + pw * 0.75;
    el("text", { x: px + (right ? 9 : -9), y: Math.max(py - 8, M.top + 10), "text-anchor": right ? "start" : "end" }, pg)
      .textContent = "peak " + dev.peak.label;

    // Hover: a cursor line and the bytes by category at that moment.
    var cursor = el("line", { "class": "cursor", y1: M.top, y2: M.top + ph, visibility: "hidden" }, svg);
    var tip = document.createElement("div");
    tip.className = "tooltip";
    tip.style.display = "none";
    root.appendChild(tip);
    var overlay = el("rect", { x: M.left, y: M.top, width: pw, height: ph, fill: "transparent" }, svg);
    overlay.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect(), sx = (ev.clientX - box.left) * W / box.width;
      var at = (sx - M.left) / pw * xmax, lo = 0, hi = n - 1;
      while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (ax.of(pts[mid]) <= at) lo = mid; else hi = mid - 1; }
      var p = pts[lo], rows = "", total = 0;
      cats.slice().reverse().forEach(function (c) {
        total += p.b[c];
        rows += "<tr><td><span class='swatch' style='background:" + data.colours[c] + "'></span> " + c +
          "</td><td class='num'>" + human(p.b[c]) + "</td></tr>";
      });
      tip.innerHTML = "<b>" + formatTime(p.t, data.duration / 100 || 1e-3) + " · event #" + p.seq + "</b> · " +
        human(total) + "<table>" + rows + "</table>";
      cursor.setAttribute("x1", sx); cursor.setAttribute("x2", sx); cursor.setAttribute("visibility", "visible");
      tip.style.display = "block";
      var left = (ev.clientX - box.left) + 14;
      if (left + tip.offsetWidth > box.width) left -= tip.offsetWidth + 28;
      tip.style.left = left + "px";
      tip.style.top = (ev.clientY - box.top + 10) + "px";
    });
    overlay.addEventListener("mouseleave", function () {
      tip.style.display = "none";
      cursor.setAttribute("visibility", "hidden");
    });
  }

  // A device's chart with its x-axis switch above it.
  function render(dev, root, axisName) {
    root.textContent = "";
    var bar = document.createElement("div");
    bar.className = "axis-switch";
    bar.appendChild(document.createTextNode("x axis: "));
    [["time", "time"], ["order", "event order"]].forEach(function (choice) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = choice[1];
      button.setAttribute("aria-pressed", choice[0] === axisName ? "true" : "false");
      button.addEventListener("click", function () { render(dev, root, choice[0]); });
      bar.appendChild(button);
    });
    root.appendChild(bar);
    drawDevice(dev, root, axisName);
  }

  // report.html#order opens with the event-order axis.
  var initialAxis = location.hash === "#order" ? "order" : "time";
  data.devices.forEach(function (dev) {
    var root = document.getElementById("chart-" + dev.device);
    if (root) render(dev, root, initialAxis);
  });
  document.body.setAttribute("data-chart", "drawn");
})();
]==]

return assets
