// pipeline console: sortable tables and the overview's live figures. The
// pages work without it.
"use strict";

function cellValue(td) {
  const v = td.dataset.sort !== undefined ? td.dataset.sort : td.textContent.trim();
  const n = parseFloat(v.replace(/[%,]/g, ""));
  return /^-?[\d.,]+%?$/.test(v) && !isNaN(n) ? n : v.toLowerCase();
}

function makeSortable(table) {
  const heads = table.tHead ? table.tHead.rows[0].cells : [];
  Array.from(heads).forEach((th, i) => {
    if (th.classList.contains("nosort")) return;
    th.addEventListener("click", () => {
      const asc = th.getAttribute("aria-sort") !== "ascending";
      Array.from(heads).forEach((h) => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = cellValue(a.cells[i]), y = cellValue(b.cells[i]);
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
      rows.forEach((r) => body.appendChild(r));
    });
  });
}

function live(el) {
  const url = el.dataset.live;
  const show = (v) => (v === null || v === undefined ? "unknown" : v === "" ? "n/a" : String(v));
  const tick = () => {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then((o) => {
        document.querySelectorAll("[data-k]").forEach((n) => {
          const k = n.dataset.k;
          if (!(k in o)) return;
          if (k === "at") { n.textContent = new Date(o.at).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC"); return; }
          n.textContent = show(o[k]);
        });
      })
      .catch(() => {});
  };
  setInterval(tick, 3000);
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("table.sortable").forEach(makeSortable);
  const l = document.querySelector("[data-live]");
  if (l) live(l);
});
