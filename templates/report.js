// Sort a table by the clicked column: numbers by data-v when present, text otherwise.
document.querySelectorAll("table.sortable th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0];
    var asc = !th.classList.contains("asc");
    table.querySelectorAll("th").forEach(function (h) { h.classList.remove("asc", "desc"); });
    th.classList.add(asc ? "asc" : "desc");
    var key = function (row) {
      var cell = row.cells[col], v = cell.getAttribute("data-v");
      return v === null ? cell.textContent.trim().toLowerCase() : parseFloat(v);
    };
    Array.from(body.rows).sort(function (a, b) {
      var x = key(a), y = key(b);
      if (typeof x === "number" && isNaN(x)) return 1;
      if (typeof y === "number" && isNaN(y)) return -1;
      return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
    }).forEach(function (row) { body.appendChild(row); });
  });
});
