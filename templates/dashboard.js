// A panel's points: hover shows a point's value, interval, commit, PR and date (#tip); a
// click shows that and its run's links (#pop). The panel carries its data as attributes
// (charts.py: data-x "x0,dx", data-v values, data-r run indexes, data-iv intervals, data-u
// the unit); the page's run list (JSON, data-runs names it) holds commits, dates and links.
(function () {
  var pop = document.getElementById("pop"), tip = document.getElementById("tip"), lists = {};
  if (!pop) return;
  function runsOf(panel) {
    var id = panel.closest("[data-runs]").getAttribute("data-runs");
    if (!(id in lists)) lists[id] = JSON.parse(document.getElementById(id).textContent);
    return lists[id];
  }
  function parsed(panel) {
    if (!panel._d) {
      var x = panel.getAttribute("data-x").split(",");
      panel._d = {x0: +x[0], dx: +x[1], v: JSON.parse(panel.getAttribute("data-v")),
                  r: JSON.parse(panel.getAttribute("data-r")),
                  iv: JSON.parse(panel.getAttribute("data-iv") || "null"),
                  u: panel.getAttribute("data-u"), int: panel.getAttribute("data-int") === "1"};
    }
    return panel._d;
  }
  function num(v) { return String(Number(v.toPrecision(3))); }
  function at(panel, ev) {  // the point under the pointer, by its x in the panel's own units
    var d = parsed(panel), pt = panel.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    var ux = pt.matrixTransform(panel.getScreenCTM().inverse()).x;
    var i = Math.round((ux - d.x0) / d.dx);
    return i < 0 || i >= d.v.length ? null : i;
  }
  function text(panel, i) {
    var d = parsed(panel), v = d.v[i];
    var unit = d.u === "×" ? "×" : d.u ? " " + d.u : "";
    var parts = [(d.int ? String(Math.round(v)) : String(Number(v.toPrecision(4)))) + unit];
    if (d.iv && d.iv[i]) parts.push(num(d.iv[i][0]) + "–" + num(d.iv[i][1]));
    var r = d.r[i] >= 0 ? runsOf(panel)[d.r[i]] : null;
    if (r) {
      parts.push("commit " + (r.commit || "?").slice(0, 8));
      if (r.pr !== null && r.pr !== undefined) parts.push("PR #" + r.pr);
      parts.push(r.date);
    }
    return {text: parts.join(" · "), run: r};
  }
  function place(box, ev) {
    box.style.left = Math.min(ev.clientX + 12, window.innerWidth - 380) + "px";
    box.style.top = (ev.clientY + 12) + "px";
    box.style.display = "block";
  }
  function link(href, label) {
    if (!href) return null;
    var a = document.createElement("a"); a.href = href; a.textContent = label; return a;
  }
  document.addEventListener("mousemove", function (ev) {
    var panel = ev.target.closest ? ev.target.closest("svg.panel[data-v]") : null;
    var i = panel ? at(panel, ev) : null;
    if (!tip) return;
    if (i === null) { tip.style.display = "none"; return; }
    tip.textContent = text(panel, i).text; place(tip, ev);
  });
  document.addEventListener("click", function (ev) {
    var panel = ev.target.closest ? ev.target.closest("svg.panel[data-v]") : null;
    var i = panel ? at(panel, ev) : null;
    if (i === null) { if (!pop.contains(ev.target)) pop.style.display = "none"; return; }
    var got = text(panel, i), r = got.run || {};
    pop.textContent = "";
    var head = document.createElement("div"); head.textContent = got.text; pop.appendChild(head);
    var row = document.createElement("div");
    [link(r.report, "run report"), link(r.commit_url, "commit"),
     link(r.pr_url, "PR #" + r.pr)].forEach(function (a) { if (a) row.appendChild(a); });
    if (!row.childNodes.length) row.textContent = "(no report or commit link known)";
    pop.appendChild(row);
    if (tip) tip.style.display = "none";
    place(pop, ev);
  });
})();
// The regressions page: show only the rows that pass every filter.
(function () {
  var table = document.getElementById("steps");
  if (!table) return;
  var inputs = document.querySelectorAll(".filters select, .filters input");
  function apply() {
    var want = {}, shown = 0;
    inputs.forEach(function (el) { want[el.name] = el.value; });
    Array.from(table.tBodies[0].rows).forEach(function (row) {
      var d = row.dataset, ok = true;
      ["suite", "model", "metric", "kind"].forEach(function (k) {
        if (want[k] && d[k] !== want[k]) ok = false;
      });
      if (want.size && parseFloat(d.size) < parseFloat(want.size) / 100) ok = false;
      row.style.display = ok ? "" : "none";
      if (ok) shown++;
    });
    document.getElementById("shown").textContent = shown;
  }
  inputs.forEach(function (el) { el.addEventListener("input", apply); });
  apply();
})();
