// smsgw console: the little JavaScript it has. Everything works without it.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Times are rendered in UTC; show them in the operator's zone as a tooltip.
  document.querySelectorAll("time[datetime]").forEach(function (t) {
    var d = new Date(t.getAttribute("datetime"));
    if (!isNaN(d)) t.title = d.toLocaleString();
  });
  // "/" jumps to the page's first search field, as on most consoles.
  document.addEventListener("keydown", function (e) {
    if (e.key !== "/" || e.target.closest("input, select, textarea")) return;
    var f = document.querySelector("form[role=search] input:not([type=hidden])");
    if (f) { e.preventDefault(); f.focus(); f.select(); }
  });
  // After an action, focus its confirmation so screen readers announce it.
  var note = document.querySelector(".notice, .error");
  if (note) { note.tabIndex = -1; note.focus(); }
});
