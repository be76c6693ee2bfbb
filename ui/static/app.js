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

// live swaps in the overview's figures every 3 s, rendered by the server
// as the page renders them (/overview/live): every figure refreshes, the
// cards, their shares, the cost, the class table and the funnel. A sorted
// table keeps its order.
function live(el) {
  const url = el.dataset.live;
  const tick = () => {
    fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
      .then((html) => {
        const sorted = {};
        el.querySelectorAll("table.sortable[id]").forEach((t) => {
          const heads = t.tHead ? Array.from(t.tHead.rows[0].cells) : [];
          const i = heads.findIndex((h) => h.hasAttribute("aria-sort"));
          if (i >= 0) sorted[t.id] = { i, asc: heads[i].getAttribute("aria-sort") === "ascending" };
        });
        const next = new DOMParser().parseFromString(html, "text/html");
        el.replaceChildren(...next.body.childNodes);
        el.querySelectorAll("table.sortable").forEach((t) => {
          makeSortable(t);
          const s = sorted[t.id];
          if (!s) return;
          const th = t.tHead.rows[0].cells[s.i];
          if (!s.asc) th.setAttribute("aria-sort", "ascending"); // the click turns it to descending
          th.click();
        });
        el.dataset.refreshed = String(Number(el.dataset.refreshed || 0) + 1);
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
