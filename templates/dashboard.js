// Click a point: a box with its run's hover text and links (report, commit, PR).
(function () {
  var pop = document.getElementById("pop"), lists = {};
  if (!pop) return;
  function runsOf(pt) {  // the run list of the point's panels, parsed once
    var id = pt.closest("[data-runs]").getAttribute("data-runs");
    if (!(id in lists)) lists[id] = JSON.parse(document.getElementById(id).textContent);
    return lists[id];
  }
  function link(href, label) {
    if (!href) return null;
    var a = document.createElement("a"); a.href = href; a.textContent = label; return a;
  }
  document.addEventListener("click", function (ev) {
    var pt = ev.target.closest ? ev.target.closest("circle[data-i]") : null;
    if (!pt) { if (!pop.contains(ev.target)) pop.style.display = "none"; return; }
    var r = runsOf(pt)[+pt.getAttribute("data-i")], tip = pt.querySelector("title");
    pop.textContent = "";
    var head = document.createElement("div");
    head.textContent = tip ? tip.textContent : r.commit; pop.appendChild(head);
    var row = document.createElement("div");
    [link(r.report, "run report"), link(r.commit_url, "commit"),
     link(r.pr_url, "PR #" + r.pr)].forEach(function (a) { if (a) row.appendChild(a); });
    if (!row.childNodes.length) row.textContent = "(no report or commit link known)";
    pop.appendChild(row);
    pop.style.left = Math.min(ev.clientX + 8, window.innerWidth - 380) + "px";
    pop.style.top = (ev.clientY + 8) + "px";
    pop.style.display = "block";
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
